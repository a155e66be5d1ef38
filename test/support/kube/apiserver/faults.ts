import { setTimeout as sleep } from "node:timers/promises";
import { mediaType } from "./patch/apply-patch.ts";
import { type ApiError, injected } from "./status-errors.ts";

/** What a fault can be targeted on. */
export interface FaultRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  contentType: string | undefined;
  watch: boolean;
}

/**
 * "all", a predicate, or fields that must all match: method (any case), path (exact string or RegExp),
 * contentType (media type, parameters ignored), watch (true for `?watch=true` streams).
 */
export type RequestMatcher =
  | "all"
  | ((request: FaultRequest) => boolean)
  | { method?: string; path?: string | RegExp; contentType?: string; watch?: boolean };

/** "before": the request is not processed yet; "after": the write is committed, only the answer is affected. */
export type FaultPhase = "before" | "after";

export interface FailOptions {
  match?: RequestMatcher;
  status: number;
  /** How many matching requests fail; 1 when omitted. */
  count?: number;
  /** Seconds, sent as the Retry-After header and in the Status details (429, 503). */
  retryAfter?: number;
  message?: string;
  phase?: FaultPhase;
  /**
   * A matching watch is answered as kube-apiserver answers one it cannot serve once begun (a
   * version too old, 410 Expired): 200, one ERROR event carrying the Status, the stream ended.
   */
  watchEvent?: boolean;
}

export interface LatencyOptions {
  match?: RequestMatcher;
  ms: number;
  phase?: FaultPhase;
}

export interface HangOptions {
  match?: RequestMatcher;
  phase?: FaultPhase;
}

export interface Hang {
  /** Lets held requests go on (and stops holding new ones). */
  release(): void;
  /** Requests held so far. */
  readonly held: number;
  /** Resolves once `n` requests have been held, so a test knows its request arrived. */
  waitForHeld(n?: number): Promise<void>;
}

/** Raised when the server closes while a request waits on a fault: the socket is destroyed, never answered. */
export class Abandoned extends Error {}

export function matcherFor(matcher: RequestMatcher | undefined): (request: FaultRequest) => boolean {
  if (matcher === undefined || matcher === "all") return () => true;
  if (typeof matcher === "function") return matcher;
  return (r) =>
    (matcher.method === undefined || matcher.method.toUpperCase() === r.method) &&
    (matcher.path === undefined ||
      (typeof matcher.path === "string" ? matcher.path === r.path : matcher.path.test(r.path))) &&
    (matcher.contentType === undefined || mediaType(matcher.contentType) === mediaType(r.contentType)) &&
    (matcher.watch === undefined || matcher.watch === r.watch);
}

interface Failure {
  matches: (r: FaultRequest) => boolean;
  remaining: number;
  error: () => ApiError;
  phase: FaultPhase;
}

interface Latency {
  matches: (r: FaultRequest) => boolean;
  ms: number;
  phase: FaultPhase;
}

interface HeldGate {
  matches: (r: FaultRequest) => boolean;
  phase: FaultPhase;
  released: boolean;
  open: Promise<void>;
  hold: () => void;
  release: () => void;
}

/** The per-request faults; connection-level ones (down, dropped watches) live with the HTTP server. */
export class FaultPlan {
  #failures: Failure[] = [];
  #latencies: Latency[] = [];
  #gates: HeldGate[] = [];
  #abandon = new AbortController();

  failNext(options: FailOptions): void {
    const count = options.count ?? 1;
    if (!Number.isInteger(count) || count < 1)
      throw new Error(`failNext count must be a positive integer, got ${count}`);
    this.#failures.push({
      matches: matcherFor(options.match),
      remaining: count,
      error: () => injected(options.status, options.message, options.retryAfter, options.watchEvent),
      phase: options.phase ?? "before",
    });
  }

  setLatency(options: LatencyOptions): void {
    if (!(options.ms >= 0)) throw new Error(`setLatency ms must be >= 0, got ${options.ms}`);
    this.#latencies.push({
      matches: matcherFor(options.match),
      ms: options.ms,
      phase: options.phase ?? "before",
    });
  }

  hang(options: HangOptions = {}): Hang {
    let open = () => {};
    let held = 0;
    const waiters = new Set<() => void>();
    const gate: HeldGate = {
      matches: matcherFor(options.match),
      phase: options.phase ?? "before",
      released: false,
      open: new Promise<void>((resolve) => {
        open = resolve;
      }),
      hold: () => {
        held++;
        for (const w of [...waiters]) w();
      },
      release: () => {
        gate.released = true;
        open();
      },
    };
    this.#gates.push(gate);
    return {
      release: gate.release,
      get held() {
        return held;
      },
      waitForHeld: (n = 1) =>
        new Promise<void>((resolve) => {
          const check = () => {
            if (held >= n) {
              waiters.delete(check);
              resolve();
            }
          };
          waiters.add(check);
          check();
        }),
    };
  }

  /** Applies latency, then holds, then fails, for the faults of this phase. Returns the error to answer with. */
  async intercept(request: FaultRequest, phase: FaultPhase): Promise<ApiError | undefined> {
    const signal = this.#abandon.signal;
    for (const latency of this.#latencies) {
      if (latency.phase === phase && latency.matches(request)) {
        await sleep(latency.ms, undefined, { signal }).catch(() => {
          throw new Abandoned();
        });
      }
    }
    for (const gate of this.#gates) {
      if (gate.phase === phase && !gate.released && gate.matches(request)) {
        gate.hold();
        await Promise.race([
          gate.open,
          new Promise<never>((_, reject) => {
            if (signal.aborted) reject(new Abandoned());
            signal.addEventListener("abort", () => reject(new Abandoned()), { once: true });
          }),
        ]);
      }
    }
    const failure = this.#failures.find((f) => f.phase === phase && f.remaining > 0 && f.matches(request));
    if (!failure) return undefined;
    failure.remaining--;
    return failure.error();
  }

  /** Removes every fault and lets held requests go on. */
  clear(): void {
    for (const gate of this.#gates) gate.release();
    this.#failures = [];
    this.#latencies = [];
    this.#gates = [];
  }

  /** Server shutdown: every waiting request is abandoned. */
  abandonAll(): void {
    this.#abandon.abort();
    this.#abandon = new AbortController();
  }
}
