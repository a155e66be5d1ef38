// What a simulated process sends to the simulated server: one request per lease statement, and
// how each one executes on the row versions it sees (lease-statements.ts does the SQL part).
import {
  claim,
  deleteRow,
  type Executed,
  type LeaseRow,
  read,
  release,
  releaseMany,
  renew,
  renewMany,
  reserve,
  type StatementContext,
} from "./lease-statements.ts";

export type Request =
  /** session: the notice session the claim records (session takeover), else none. */
  | {
      kind: "claim";
      key: string;
      holder: string;
      durationMs: number;
      session?: number;
      /** Crash takeover: the holders the kubelet reported dead, as the claim carries them. */
      crashed?: readonly string[];
    }
  | { kind: "renew"; key: string; holder: string; fence: number; durationMs: number }
  | {
      kind: "renewMany";
      holder: string;
      terms: ReadonlyArray<{ key: string; fence: number }>;
      durationMs: number;
    }
  /**
   * successorMs: a graceful stop's release, which reserves for the best live candidate (close())
   * but none of `crashed`, the holders the kubelet reported terminated.
   */
  | {
      kind: "release";
      key: string;
      holder: string;
      fence: number;
      successorMs?: number;
      crashed?: readonly string[];
    }
  | {
      kind: "releaseMany";
      holder: string;
      terms: ReadonlyArray<{ key: string; fence: number }>;
      successorMs?: number;
      crashed?: readonly string[];
    }
  | { kind: "read"; key: string }
  | { kind: "delete"; key: string }
  | { kind: "reserve"; key: string; fence: number; target: string; windowMs: number };

export type Kind = Request["kind"];

/** The rows a request touches, in the order it locks them. */
export function keysOf(request: Request): string[] {
  if (request.kind === "renewMany" || request.kind === "releaseMany") {
    return [...new Set(request.terms.map((t) => t.key))].sort();
  }
  return [request.key];
}

/** Outcome of executing a request: its answer and every row version to commit (null: deleted). */
export type Execution = { answer: unknown; writes: Map<string, LeaseRow | null> } | { error: string };

function single<A>(key: string, executed: Executed<A>): Execution {
  if ("error" in executed) return executed;
  const writes = new Map<string, LeaseRow | null>();
  if (executed.write !== undefined) writes.set(key, executed.write);
  return { answer: executed.answer, writes };
}

export function execute(request: Request, contexts: Map<string, StatementContext>): Execution {
  if (request.kind === "renewMany") {
    const result = renewMany(contexts, request.holder, request.terms, request.durationMs);
    if ("error" in result) return result;
    return { answer: result.answer, writes: new Map(result.writes.map((row) => [row.key, row])) };
  }
  if (request.kind === "releaseMany") {
    const result = releaseMany(contexts, request.holder, request.terms, request.successorMs, request.crashed);
    if ("error" in result) return result;
    return { answer: result.answer, writes: new Map(result.writes.map((row) => [row.key, row])) };
  }
  const ctx = contexts.get(request.key);
  if (!ctx) throw new Error(`no context for ${request.key}`);
  switch (request.kind) {
    case "claim":
      return single(
        request.key,
        claim(ctx, request.key, request.holder, request.durationMs, request.session, request.crashed),
      );
    case "renew":
      return single(request.key, renew(ctx, request.holder, request.fence, request.durationMs));
    case "release":
      return single(
        request.key,
        release(ctx, request.holder, request.fence, request.successorMs, request.crashed),
      );
    case "read":
      return single(request.key, read(ctx));
    case "delete":
      return single(request.key, deleteRow(ctx));
    case "reserve":
      return single(request.key, reserve(ctx, request.fence, request.target, request.windowMs));
  }
}

/**
 * UPDATE and DELETE first judge the version their snapshot saw: rows whose WHERE fails there are
 * neither locked nor waited for. INSERT … ON CONFLICT always locks; a read never does.
 */
export const judgedOnSnapshot = (request: Request) =>
  request.kind === "renew" ||
  request.kind === "renewMany" ||
  request.kind === "release" ||
  request.kind === "releaseMany" ||
  request.kind === "delete" ||
  request.kind === "reserve";

export function describe(request: Request): string {
  switch (request.kind) {
    case "claim":
      return `claim(${request.key}, ${request.holder})`;
    case "renew":
      return `renew(${request.key}, ${request.holder}, fence ${request.fence})`;
    case "renewMany":
      return `renewMany(${request.holder}, ${request.terms.map((t) => `${t.key}:${t.fence}`).join(" ")})`;
    case "release":
      return `release(${request.key}, ${request.holder}, fence ${request.fence}${successor(request)})`;
    case "releaseMany":
      return `releaseMany(${request.holder}, ${request.terms.map((t) => `${t.key}:${t.fence}`).join(" ")}${successor(request)})`;
    case "read":
      return `read(${request.key})`;
    case "delete":
      return `DELETE(${request.key})`;
    case "reserve":
      return `reserve(${request.key}, fence ${request.fence}, for ${request.target}, ${request.windowMs} ms)`;
  }
}

const successor = (request: { successorMs?: number; crashed?: readonly string[] }) =>
  request.successorMs === undefined
    ? ""
    : `, to the best successor for ${request.successorMs} ms${request.crashed?.length ? ` but ${request.crashed.join(" ")}` : ""}`;
