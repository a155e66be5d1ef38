// The PostgreSQL server as the lease statements meet it (READ COMMITTED, one statement per
// transaction): a statement takes its clock_timestamp() and its snapshot when it starts, then
// waits for the row lock; whoever holds the lock commits first (a commit can stall: synchronous
// replication to a standby that went away, a slow fsync) and the lock then goes to ANY waiter,
// the scheduler's pick. Nothing a client does cancels server work; only the server-side
// statement_timeout can (off today), and it cannot interrupt an fsync.
import type { EventLoop, SimEvent } from "./event-loop.ts";
import type { CandidateRow, LeaseRow, Semantics, StatementContext } from "./lease-statements.ts";
import type { Rng } from "./prng.ts";
import { type Execution, execute, judgedOnSnapshot, keysOf, type Request } from "./requests.ts";

export interface ServerConfig {
  sem: Semantics;
  /** statement_timeout (and lock_timeout) of lease connections, ms; null: none, as today. */
  statementTimeoutMs: number | null;
  /** The candidates table a release with a successor reads (absent: empty). */
  candidates?: readonly CandidateRow[];
}

export type Reply = { answer: unknown } | { error: string };

export interface Statement {
  id: number;
  request: Request;
  from: string;
  /** Client side: when it was sent and when the client stops waiting for it (sim µs). */
  sentUs: number;
  clientDeadlineUs: number;
  /** Server side: when it started (sim µs) and its clock_timestamp() (server µs). */
  startUs: number;
  now: number;
  snapshot: Map<string, LeaseRow | null>;
  lockKeys: string[];
  held: number;
  /** Server clock when the statement reached each row (scan) and when it got its lock. */
  reachedAt: Map<string, number>;
  lockedAt: Map<string, number>;
  phase: "locking" | "committing" | "done";
  /** Waited in a commit that no timeout could cancel (fsync). */
  uncancellable: boolean;
  startFence: number | null;
  execution: Extract<Execution, { writes: unknown }> | null;
  timeout: SimEvent | null;
  reply: (reply: Reply, stmt: Statement) => void;
}

export interface ServerHooks {
  committed(stmt: Statement, before: ReadonlyMap<string, LeaseRow | null>): void;
  finished(stmt: Statement): void;
  notify(key: string): void;
}

interface Lock {
  owner: object | null;
  waiters: Array<{ who: object; granted: () => void }>;
}

export class Server {
  readonly rows = new Map<string, LeaseRow>();
  clockOffsetUs = 0;
  readonly #loop: EventLoop;
  readonly #rng: Rng;
  readonly #config: ServerConfig;
  readonly #hooks: ServerHooks;
  readonly #locks = new Map<string, Lock>();
  readonly #committing: Statement[] = [];
  readonly #stalls = { sync: 0, fsync: 0 };
  readonly #running = new Set<Statement>();
  #counter = 0;
  #tuples = 0;
  #ids = 0;
  /** Session takeover: when each notice session's backend exited (sim µs); absent while it lives. */
  readonly #sessionEnds = new Map<number, number>();
  #sessions = 0;

  constructor(loop: EventLoop, rng: Rng, config: ServerConfig, hooks: ServerHooks) {
    this.#loop = loop;
    this.#rng = rng;
    this.#config = config;
    this.#hooks = hooks;
  }

  /** clock_timestamp(): the simulated instant on the server's own (steppable) wall clock. */
  clock(): number {
    return this.#loop.nowUs + this.clockOffsetUs;
  }

  /** A new backend, as a notice connection's: its id is what a claim records. */
  openSession(): number {
    return ++this.#sessions;
  }

  /** The backend exited: from now on pg_stat_activity no longer lists it. */
  endSession(session: number): void {
    if (!this.#sessionEnds.has(session)) this.#sessionEnds.set(session, this.#loop.nowUs);
  }

  /**
   * Whether a session is gone for this statement. pg_stat_get_activity reads a snapshot taken at
   * its first call in the transaction: a renew's or a read's scan, at its start (so a renew that
   * then waits for the row lock commits on that verdict); the claim's ON CONFLICT clause, once it
   * holds the row lock.
   */
  #goneFor(stmt: Statement): (session: number) => boolean {
    const at = stmt.request.kind === "claim" ? this.#loop.nowUs : stmt.startUs;
    return (session) => (this.#sessionEnds.get(session) ?? Number.POSITIVE_INFINITY) <= at;
  }

  /** Statements still on the server: waiting for a lock or for their commit. */
  running(): ReadonlySet<Statement> {
    return this.#running;
  }

  submit(
    request: Request,
    from: string,
    client: { sentUs: number; deadlineUs: number },
    reply: (r: Reply, stmt: Statement) => void,
  ): Statement {
    const keys = keysOf(request);
    const stmt: Statement = {
      id: ++this.#ids,
      request,
      from,
      sentUs: client.sentUs,
      clientDeadlineUs: client.deadlineUs,
      startUs: this.#loop.nowUs,
      now: this.clock(),
      snapshot: new Map(keys.map((k) => [k, this.rows.get(k) ?? null])),
      lockKeys: keys,
      held: 0,
      reachedAt: new Map(),
      lockedAt: new Map(),
      phase: "locking",
      uncancellable: false,
      startFence:
        request.kind === "claim" && this.#config.sem.fenceCounter === "at-start" ? ++this.#counter : null,
      execution: null,
      timeout: null,
      reply,
    };
    if (request.kind === "read") {
      this.#finish(stmt, this.#outcome(execute(request, this.#contexts(stmt, keys, true))));
      return stmt;
    }
    if (judgedOnSnapshot(request)) {
      const first = execute(request, this.#contexts(stmt, keys, true));
      if ("writes" in first) {
        if (first.writes.size === 0) {
          this.#finish(stmt, { answer: first.answer });
          return stmt;
        }
        stmt.lockKeys = [...first.writes.keys()].sort();
      }
    }
    this.#running.add(stmt);
    const timeoutMs = this.#config.statementTimeoutMs;
    if (timeoutMs !== null) {
      stmt.timeout = this.#loop.at(stmt.startUs + timeoutMs * 1000, null, () => this.#timedOut(stmt));
    }
    this.#lockNext(stmt);
    return stmt;
  }

  #contexts(stmt: Statement, keys: string[], onSnapshot: boolean): Map<string, StatementContext> {
    const sem = this.#config.sem;
    return new Map(
      keys.map((key) => {
        const snapshot = stmt.snapshot.get(key) ?? null;
        const latest = onSnapshot ? snapshot : (this.rows.get(key) ?? null);
        // An UPDATE re-checks its WHERE (and clock_timestamp()) only on a version that changed
        // while it waited; on the one it scanned, the scan's verdict stands.
        const liveNow =
          latest !== snapshot ? (stmt.lockedAt.get(key) ?? stmt.now) : (stmt.reachedAt.get(key) ?? stmt.now);
        return [
          key,
          {
            sem,
            now: stmt.now,
            liveNow,
            snapshot,
            latest,
            drawFence: () => ++this.#counter,
            startFence: stmt.startFence,
            newTuple: () => ++this.#tuples,
            sessionGone: this.#goneFor(stmt),
            candidates: this.#config.candidates?.filter((c) => c.key === key) ?? [],
          },
        ];
      }),
    );
  }

  #outcome(execution: Execution): Reply {
    return "error" in execution ? { error: execution.error } : { answer: execution.answer };
  }

  /** Rows one at a time, as the executor updates them: the next row is scanned after this one's wait. */
  #lockNext(stmt: Statement): void {
    while (stmt.held < stmt.lockKeys.length) {
      const key = stmt.lockKeys[stmt.held] as string;
      stmt.reachedAt.set(key, this.clock());
      const locked = () => {
        stmt.lockedAt.set(key, this.clock());
        stmt.held++;
      };
      const granted = this.#acquire(key, stmt, () => {
        locked();
        this.#lockNext(stmt);
      });
      if (!granted) return;
      locked();
    }
    this.#run(stmt);
  }

  /** Runs once every row lock is held: judged on the newest committed versions (EvalPlanQual). */
  #run(stmt: Statement): void {
    const execution = execute(stmt.request, this.#contexts(stmt, stmt.lockKeys, false));
    if ("error" in execution) {
      this.#end(stmt, { error: execution.error });
      return;
    }
    stmt.execution = execution;
    if (this.#stalls.sync + this.#stalls.fsync > 0) {
      stmt.phase = "committing";
      stmt.uncancellable ||= this.#stalls.fsync > 0;
      this.#committing.push(stmt);
      return;
    }
    this.#commit(stmt);
  }

  #commit(stmt: Statement): void {
    const execution = stmt.execution;
    if (!execution) throw new Error("commit before execution");
    const before = new Map<string, LeaseRow | null>();
    for (const [key, row] of execution.writes) {
      before.set(key, this.rows.get(key) ?? null);
      if (row) this.rows.set(key, row);
      else this.rows.delete(key);
    }
    this.#hooks.committed(stmt, before);
    this.#end(stmt, { answer: execution.answer });
    if (stmt.request.kind === "release" && execution.answer === true) this.#hooks.notify(stmt.request.key);
    if (stmt.request.kind === "releaseMany") {
      for (const key of (execution.answer as Map<string, number>).keys()) this.#hooks.notify(key);
    }
  }

  /** Commit or rollback: the locks go, the answer leaves. */
  #end(stmt: Statement, reply: Reply): void {
    this.#running.delete(stmt);
    if (stmt.timeout) stmt.timeout.cancelled = true;
    this.#finish(stmt, reply);
    for (let i = 0; i < stmt.held; i++) this.#release(stmt.lockKeys[i] as string, stmt);
  }

  #finish(stmt: Statement, reply: Reply): void {
    stmt.phase = "done";
    this.#hooks.finished(stmt);
    stmt.reply(reply, stmt);
  }

  /**
   * statement_timeout: a lock wait is cancelled and rolled back; a commit waiting for a
   * synchronous standby is cut short and stays committed locally (PostgreSQL's warning "the
   * transaction has already committed locally"); an fsync cannot be interrupted.
   */
  #timedOut(stmt: Statement): void {
    if (stmt.phase === "committing") {
      if (this.#stalls.fsync > 0) {
        stmt.uncancellable = true;
        return;
      }
      this.#committing.splice(this.#committing.indexOf(stmt), 1);
      this.#commit(stmt);
      return;
    }
    if (stmt.phase !== "locking") return;
    const waitingOn = stmt.lockKeys[stmt.held];
    if (waitingOn !== undefined) {
      const lock = this.#locks.get(waitingOn);
      if (lock) lock.waiters = lock.waiters.filter((w) => w.who !== stmt);
    }
    this.#end(stmt, { error: "canceling statement due to statement timeout" });
  }

  #acquire(key: string, who: object, granted: () => void): boolean {
    let lock = this.#locks.get(key);
    if (!lock) {
      lock = { owner: null, waiters: [] };
      this.#locks.set(key, lock);
    }
    if (lock.owner === null) {
      lock.owner = who;
      return true;
    }
    lock.waiters.push({ who, granted });
    return false;
  }

  /** The lock goes to any waiter: PostgreSQL's queue order is not a promise the lease may rely on. */
  #release(key: string, who: object): void {
    const lock = this.#locks.get(key);
    if (!lock || lock.owner !== who) throw new Error(`release of ${key} by a non-owner`);
    lock.owner = null;
    if (lock.waiters.length === 0) return;
    const [next] = lock.waiters.splice(Math.floor(this.#rng.next() * lock.waiters.length), 1);
    if (!next) return;
    lock.owner = next.who;
    next.granted();
  }

  /**
   * Another session's transaction (an operator, a tool) that runs SELECT … FOR UPDATE on the row
   * and ends `durationUs` later, whether or not it got the lock by then. `rewrites`: an UPDATE
   * instead, which commits a new version of the row even when it changes no value.
   */
  holdRowLock(key: string, durationUs: number, rewrites = false): void {
    const who = {};
    let holding = false;
    const granted = () => {
      holding = true;
    };
    if (this.#acquire(key, who, granted)) granted();
    this.#loop.at(this.#loop.nowUs + durationUs, null, () => {
      if (holding) {
        const row = this.rows.get(key);
        if (rewrites && row) this.rows.set(key, { ...row });
        this.#release(key, who);
        return;
      }
      const lock = this.#locks.get(key);
      if (lock) lock.waiters = lock.waiters.filter((w) => w.who !== who);
    });
  }

  startStall(kind: "sync" | "fsync"): void {
    this.#stalls[kind]++;
    if (kind === "fsync") for (const stmt of this.#committing) stmt.uncancellable = true;
  }

  /** Every commit held back goes through, in an order the scheduler picks. */
  endStall(kind: "sync" | "fsync"): void {
    this.#stalls[kind]--;
    if (this.#stalls.sync + this.#stalls.fsync > 0) return;
    const waiting = this.#committing.splice(0);
    while (waiting.length > 0) {
      const [stmt] = waiting.splice(Math.floor(this.#rng.next() * waiting.length), 1);
      if (stmt) this.#commit(stmt);
    }
  }
}
