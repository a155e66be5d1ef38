// Under --session-takeover: when did the holder's recorded session end? Whatever ends it (a
// killed backend, a cut link the server notices, the process's death), a follower may take the
// term over from then on, and the checker measures the old holder's belief from that end. A
// watch polls the lease row's recorded session on a session of its own and keeps, per term,
// the last poll that saw it alive and the first that saw it gone.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { leaseTable } from "../../src/postgres/index.ts";
import type { SessionEnd } from "./history.ts";

const TABLE = leaseTable();
const POLL_MS = 20;

// The tracked session ($2, $3) is checked in the same statement that reads which session the row
// records now: one that ended and was taken over between two polls is still seen gone.
const alive = (pid: string, started: string) =>
  `EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = ${pid} AND backend_start = ${started})`;
const LOOK = `SELECT ${alive("$2", "$3::timestamptz")} AS tracked_alive,
       l.holder, l.fence::text, l.session_pid, l.session_started_at::text AS started,
       ${alive("l.session_pid", "l.session_started_at")} AS row_alive,
       pg_postmaster_start_time()::text AS server,
       -- Only a session recorded by this very term, on this very server, can be taken over.
       (l.session_fence = l.fence AND l.session_server_started_at = pg_postmaster_start_time()) AS recorded
  FROM (SELECT 1) one LEFT JOIN ${TABLE.qualified} l ON l.key = $1`;

interface Tracked {
  holder: string;
  fence: number;
  pid: number;
  started: string;
  server: string;
  /** When the last poll that saw it alive was sent. */
  aliveSentAt: number;
}

interface Look {
  tracked_alive: boolean;
  row_alive: boolean | null;
  holder: string | null;
  fence: string | null;
  session_pid: number | null;
  started: string | null;
  server: string;
  recorded: boolean | null;
}

export class SessionWatch {
  readonly ends: SessionEnd[] = [];
  #tracked: Tracked | null = null;
  #client: pg.Client | null = null;
  #stop = new AbortController();
  #loop: Promise<void>;

  constructor(url: string, key: string) {
    this.#loop = this.#run(url, key);
  }

  async #run(url: string, key: string): Promise<void> {
    while (!this.#stop.signal.aborted) {
      try {
        this.#client ??= await this.#connect(url);
        const sentAt = Date.now();
        const t = this.#tracked;
        const { rows } = await this.#client.query<Look>(LOOK, [key, t?.pid ?? 0, t?.started ?? null]);
        const look = rows[0];
        if (look) this.#update(look, sentAt, Date.now());
      } catch {
        // A restart, a dropped table or a failover: look again on a new session.
        await this.#client?.end().catch(() => {});
        this.#client = null;
      }
      await sleep(POLL_MS, undefined, { signal: this.#stop.signal }).catch(() => {});
    }
    await this.#client?.end().catch(() => {});
  }

  async #connect(url: string): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: url, application_name: "chaos-session-watch" });
    client.on("error", () => {});
    await client.connect();
    return client;
  }

  #update(look: Look, sentAt: number, answeredAt: number): void {
    const t = this.#tracked;
    if (t && look.server !== t.server) {
      // The server restarted: every session ended with it, and none of those terms can be taken over.
      this.#tracked = null;
    } else if (t && !look.tracked_alive) {
      this.ends.push({ holder: t.holder, fence: t.fence, from: t.aliveSentAt, to: answeredAt });
      this.#tracked = null;
    } else if (t) {
      t.aliveSentAt = sentAt;
    }
    const fence = look.fence === null ? null : Number(look.fence);
    if (!look.recorded || !look.row_alive || look.holder === null || fence === null) return;
    if (look.session_pid === null || look.started === null) return;
    const now = this.#tracked;
    if (now && now.holder === look.holder && now.fence === fence) return;
    // A new term (or the first seen): its session is the one that matters from now on. One seen
    // gone at its first sight is not tracked: its end would have no "alive" side.
    this.#tracked = {
      holder: look.holder,
      fence,
      pid: look.session_pid,
      started: look.started,
      server: look.server,
      aliveSentAt: sentAt,
    };
  }

  /** The term whose session is being watched now, if any. */
  tracking(): { holder: string; fence: number } | null {
    return this.#tracked && { holder: this.#tracked.holder, fence: this.#tracked.fence };
  }

  async stop(): Promise<SessionEnd[]> {
    this.#stop.abort();
    await this.#loop;
    return this.ends;
  }
}
