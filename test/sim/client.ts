// A simulated process's side of the wire: the lease store the electors call (what PgLeaseStore
// does, over a network that can delay, black-hole or reset) and the LISTEN feed of release
// notices. A call the client gave up on is not cancelled on the server: pg's query_timeout only
// drops the promise and the connection, and the statement runs on.
import type {
  ClaimAnswer,
  LeaseStore,
  LeaseView,
  ReleaseFeed,
  RenewAnswer,
} from "../../src/election/ports.ts";
import type { EventLoop, Owner } from "./event-loop.ts";
import type { RenewManyAnswer } from "./lease-statements.ts";
import type { Rng } from "./prng.ts";
import { describe, type Request } from "./requests.ts";
import type { Reply, Server } from "./server.ts";
import { fmtMs, type Trace } from "./trace.ts";

/** What faults do to one process's database link; counters, so faults may overlap. */
export interface Link {
  /** Requests vanish on the way (a black hole): the client hears nothing. */
  dropRequests: number;
  /** Answers vanish on the way back: the server did the work, the client hears nothing. */
  dropAnswers: number;
  /** The connection is reset: an error at once, the request perhaps already sent. */
  reset: number;
  extraDelayUs: number;
}

export interface Notices {
  /** Notices vanish while the feed still looks healthy (between two pings of a dead connection). */
  lose: number;
  extraDelayUs: number;
  /** The connection is known down (a failed ping or a drop): notices vanish and the feed says so. */
  down: number;
}

export interface Wire {
  loop: EventLoop;
  server: Server;
  trace: Trace;
  rng: Rng;
  /** How long the client waits for an answer (pg's query_timeout: the elector's call timeout). */
  clientTimeoutUs: number;
}

export const linkUp = (): Link => ({ dropRequests: 0, dropAnswers: 0, reset: 0, extraDelayUs: 0 });

/** One-way latency on a healthy loopback-like link: 50 µs to 1 ms. */
export function latencyUs(rng: Rng): number {
  return 50 + Math.floor(rng.next() * 950);
}

export class SimStore implements LeaseStore {
  readonly #wire: Wire;
  readonly #owner: Owner;
  readonly #link: Link;
  /** Session takeover: the notice session each claim records (null while it reconnects). */
  readonly #session: (() => number | null) | null;

  /** Crash takeover: the holders reported dead, carried by each claim (PgLeaseStore's crashedHolders). */
  readonly #crashed: () => readonly string[];

  constructor(
    wire: Wire,
    owner: Owner,
    link: Link,
    session: (() => number | null) | null = null,
    crashed: () => readonly string[] = () => [],
  ) {
    this.#wire = wire;
    this.#owner = owner;
    this.#link = link;
    this.#session = session;
    this.#crashed = crashed;
  }

  claim(key: string, holder: string, durationMs: number): Promise<ClaimAnswer> {
    const dead = this.#crashed();
    const crashed = dead.length > 0 ? { crashed: [...dead] } : {};
    if (!this.#session) return this.#call({ kind: "claim", key, holder, durationMs, ...crashed });
    // Read as the claim is sent, as PgLeaseStore does; none: refused before anything is sent.
    const session = this.#session();
    if (session === null)
      return Promise.reject(Object.assign(new Error("no notice session"), { notSent: true }));
    return this.#call({ kind: "claim", key, holder, durationMs, session, ...crashed });
  }

  renew(key: string, holder: string, fence: number, durationMs: number): Promise<RenewAnswer> {
    return this.#call({ kind: "renew", key, holder, fence, durationMs });
  }

  renewMany(
    holder: string,
    terms: ReadonlyArray<{ key: string; fence: number }>,
    durationMs: number,
  ): Promise<RenewManyAnswer> {
    return this.#call({ kind: "renewMany", holder, terms, durationMs });
  }

  release(key: string, holder: string, fence: number): Promise<boolean> {
    return this.#call({ kind: "release", key, holder, fence });
  }

  releaseMany(
    holder: string,
    terms: ReadonlyArray<{ key: string; fence: number }>,
  ): Promise<Map<string, number>> {
    return this.#call({ kind: "releaseMany", holder, terms });
  }

  read(key: string): Promise<LeaseView | null> {
    return this.#call({ kind: "read", key });
  }

  #call<T>(request: Request): Promise<T> {
    const { loop, server, trace, rng } = this.#wire;
    const owner = this.#owner;
    const link = this.#link;
    return new Promise<T>((resolve, reject) => {
      const sentUs = loop.nowUs;
      const what = trace.on ? describe(request) : "";
      const arrive = (reply: Reply) => {
        if ("error" in reply) reject(new Error(reply.error));
        else resolve(reply.answer as T);
      };
      const answer = (reply: Reply) => {
        if (link.dropAnswers > 0 || link.reset > 0) {
          trace.add(loop.nowUs, owner.name, `answer lost: ${what}`);
          return;
        }
        loop.at(loop.nowUs + latencyUs(rng) + link.extraDelayUs, owner, () => arrive(reply), true);
      };
      const deliver = () => {
        const stmt = server.submit(
          request,
          owner.name,
          { sentUs, deadlineUs: sentUs + this.#wire.clientTimeoutUs },
          (reply, stmt) => {
            if (trace.on) trace.add(loop.nowUs, "server", `#${stmt.id} ${what} -> ${show(reply)}`);
            answer(reply);
          },
        );
        if (trace.on && stmt.phase !== "done") {
          const waits =
            stmt.phase === "committing" ? "for its commit" : `for the row lock (${stmt.lockKeys.join(",")})`;
          trace.add(loop.nowUs, "server", `#${stmt.id} ${what} started, waits ${waits}`);
        }
      };
      if (link.reset > 0) {
        trace.add(sentUs, owner.name, `${what}: connection reset`);
        // The request may have left before the reset: the server would then run it all the same.
        if (rng.chance(0.5)) loop.at(sentUs + latencyUs(rng), null, deliver);
        loop.at(
          sentUs + latencyUs(rng),
          owner,
          () => reject(new Error("Connection terminated unexpectedly")),
          true,
        );
        return;
      }
      if (link.dropRequests > 0) {
        trace.add(sentUs, owner.name, `${what}: request lost`);
        return;
      }
      const delay = latencyUs(rng) + link.extraDelayUs;
      if (trace.on) {
        trace.add(
          sentUs,
          owner.name,
          `sends ${what}${link.extraDelayUs ? ` (delayed ${fmtMs(delay)})` : ""}`,
        );
      }
      loop.at(sentUs + delay, null, deliver);
    });
  }
}

function show(reply: Reply): string {
  if ("error" in reply) return `ERROR ${reply.error}`;
  const answer = reply.answer;
  if (answer instanceof Map) {
    return `{${[...answer].map(([k, v]) => `${k}: ttl ${Math.round(v.ttlMs)}ms`).join(", ")}}`;
  }
  if (answer && typeof answer === "object") {
    const a = answer as Record<string, unknown>;
    const parts = Object.entries(a)
      .filter(([k]) => k !== "acquiredAt" && k !== "expiresAt" && k !== "key")
      .map(([k, v]) => `${k}=${typeof v === "number" ? Math.round(v) : v}`);
    return parts.join(" ");
  }
  return String(answer);
}

/**
 * LISTEN on one connection per process: notices can be lost (silently, or with the connection
 * known down), delayed, or sent by anyone. Healthy unless known down; when it comes back, every
 * elector is told, as the real feed's reconnection does (release-feed.ts).
 */
export class SimFeed implements ReleaseFeed {
  readonly #listeners = new Set<(key: string) => void>();
  readonly #reconnectListeners = new Set<() => void>();
  readonly #unhealthyListeners = new Set<() => void>();
  readonly #sessionLostListeners = new Set<() => void>();
  readonly #wire: Wire;
  readonly #owner: Owner;
  readonly notices: Notices = { lose: 0, extraDelayUs: 0, down: 0 };
  /** Session takeover: the listening connection's backend, recorded with every claim; null while down. */
  session: number | null = null;
  /** A backend held still (session-stall) runs nothing, and so reads no closed socket, until then. */
  #stalled: { session: number; untilUs: number } | null = null;

  constructor(wire: Wire, owner: Owner) {
    this.#wire = wire;
    this.#owner = owner;
  }

  subscribe(listener: (key: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  subscribeReconnects(listener: () => void): () => void {
    this.#reconnectListeners.add(listener);
    return () => this.#reconnectListeners.delete(listener);
  }

  subscribeUnhealthy(listener: () => void): () => void {
    this.#unhealthyListeners.add(listener);
    return () => this.#unhealthyListeners.delete(listener);
  }

  subscribeSessionLost(listener: () => void): () => void {
    this.#sessionLostListeners.add(listener);
    return () => this.#sessionLostListeners.delete(listener);
  }

  /** Session takeover: a new backend for the listening connection (at start, and each reconnection). */
  openSession(): void {
    this.session = this.#wire.server.openSession();
    this.#wire.trace.add(this.#wire.loop.nowUs, this.#owner.name, `notice session ${this.session} opened`);
  }

  /**
   * The feed gives its session up (a ping past its timeout), in the process's own event, as the
   * real feed does: the electors hear it first, then the socket is closed; the backend exits once
   * it reads that, not before `runsFromUs` (a stalled backend), plus a network latency. Answers
   * the session given up, or null when there was none.
   */
  abandonSession(): void {
    const { loop, trace } = this.#wire;
    const session = this.session;
    if (session === null) return;
    this.session = null;
    trace.add(loop.nowUs, this.#owner.name, `gives notice session ${session} up`);
    for (const listener of this.#sessionLostListeners) listener();
    this.setDown(true);
    this.#closeSocket(session);
  }

  /** The backend of the current session stalls until `untilUs`; answers the session, if any. */
  stall(untilUs: number): number | null {
    if (this.session === null) return null;
    const longer = this.#stalled?.session === this.session && this.#stalled.untilUs > untilUs;
    if (!longer) this.#stalled = { session: this.session, untilUs };
    return this.session;
  }

  /** The process exited or was killed: the kernel closes its sockets. */
  exited(): void {
    if (this.session !== null) this.#closeSocket(this.session);
    this.session = null;
  }

  /** The backend exits once it runs and reads the closed socket: after any stall, plus the network. */
  #closeSocket(session: number): void {
    const { loop, server, trace, rng } = this.#wire;
    const stalledUntil = this.#stalled?.session === session ? this.#stalled.untilUs : 0;
    loop.at(Math.max(loop.nowUs, stalledUntil) + latencyUs(rng), null, () => {
      trace.add(loop.nowUs, "server", `backend of notice session ${session} exits`);
      server.endSession(session);
    });
  }

  healthy(): boolean {
    return this.notices.down === 0;
  }

  /** The connection is found dead (at once: the ping that finds it is not modelled) or is back. */
  setDown(down: boolean): void {
    const { loop, trace } = this.#wire;
    const wasHealthy = this.healthy();
    this.notices.down += down ? 1 : -1;
    if (wasHealthy === this.healthy()) return;
    trace.add(loop.nowUs, this.#owner.name, down ? "notice feed down" : "notice feed reconnected");
    const listeners = down ? this.#unhealthyListeners : this.#reconnectListeners;
    // The process's own event (its socket's): the listeners start promise chains.
    loop.at(
      loop.nowUs,
      this.#owner,
      () => {
        for (const listener of listeners) listener();
      },
      true,
    );
  }

  /** A NOTIFY on the channel reaches this listener (or is lost on the way). */
  /** A wake-up the process gives itself (a crash report): no notice connection carries it. */
  announce(key: string, source: string): void {
    const { loop, trace } = this.#wire;
    trace.add(loop.nowUs, this.#owner.name, `looks: ${source} ${key}`);
    for (const listener of this.#listeners) listener(key);
  }

  hear(key: string, source: string): void {
    const { loop, trace, rng } = this.#wire;
    if (this.notices.lose > 0 || this.notices.down > 0) {
      trace.add(loop.nowUs, this.#owner.name, `notice lost: ${source} ${key}`);
      return;
    }
    loop.at(
      loop.nowUs + latencyUs(rng) + this.notices.extraDelayUs,
      this.#owner,
      () => {
        trace.add(loop.nowUs, this.#owner.name, `hears notice: ${source} ${key}`);
        for (const listener of this.#listeners) listener(key);
      },
      true,
    );
  }
}
