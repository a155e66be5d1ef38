// The loops the lease-ops group times: our statements through PgLeaseStore, and the session
// advisory lock on pinned connections that users would otherwise pick. Each worker works on
// keys (or lock ids) of its own, so the figures are per-statement costs, not row contention.
import pg from "pg";
import type { PgLeaseStore } from "../../src/postgres/store.ts";
import type { Steps } from "../measure.ts";

export const HOLDER = "bench-holder";
export const OTHER_HOLDER = "bench-other-holder";
// Long enough that nothing expires during a run: every claim below is decided by holder, not time.
export const LEASE_MS = 600_000;

export type Operation = "claim" | "release" | "renew" | "read" | "failed claim";

function broken(what: string): never {
  throw new Error(`bench workload broken: ${what}`);
}

/** Claims a lease for `holder` before timing starts, and answers its fence. */
export async function hold(store: PgLeaseStore, key: string, holder: string): Promise<number> {
  const answer = await store.claim(key, holder, LEASE_MS);
  if (!answer.won) broken(`could not claim ${key} for ${holder}`);
  return answer.fence;
}

/** Claim then release of a free key: the change of hands a follower makes after a release. */
export function claimReleaseCycle(store: PgLeaseStore, key: string): Steps {
  let fence = 0;
  return [
    [
      "claim",
      async () => {
        const answer = await store.claim(key, HOLDER, LEASE_MS);
        if (!answer.won) broken(`claim of free ${key} lost`);
        fence = answer.fence;
      },
    ],
    [
      "release",
      async () => {
        if (!(await store.release(key, HOLDER, fence))) broken(`release of ${key} found nothing`);
      },
    ],
  ];
}

export function renewLoop(store: PgLeaseStore, key: string, fence: number): Steps {
  return [
    [
      "renew",
      async () => {
        const answer = await store.renew(key, HOLDER, fence, LEASE_MS);
        if (!answer.renewed) broken(`renew of ${key} lost`);
      },
    ],
  ];
}

/** A follower looking: a plain read, and the claim it would make instead, both of a held lease. */
export function readLoop(store: PgLeaseStore, heldKey: string): Steps {
  return [
    [
      "read",
      async () => {
        if (!(await store.read(heldKey))) broken(`read of ${heldKey} found nothing`);
      },
    ],
  ];
}

export function failedClaimLoop(store: PgLeaseStore, heldKey: string): Steps {
  return [
    [
      "failed claim",
      async () => {
        if ((await store.claim(heldKey, HOLDER, LEASE_MS)).won) broken(`claim of held ${heldKey} won`);
      },
    ],
  ];
}

// Named like our statements, so the comparison is statement against statement.
const TRY_LOCK = { name: "bench_try_advisory_lock", text: "SELECT pg_try_advisory_lock($1) AS ok" };
const UNLOCK = { name: "bench_advisory_unlock", text: "SELECT pg_advisory_unlock($1) AS ok" };

async function ask(client: pg.Client, statement: { name: string; text: string }, id: number) {
  const { rows } = await client.query<{ ok: boolean }>({ ...statement, values: [id] });
  return rows[0]?.ok === true;
}

export async function lockFromAnotherSession(holder: pg.Client, id: number): Promise<void> {
  if (!(await ask(holder, TRY_LOCK, id))) broken(`advisory lock ${id} already taken`);
}

export function advisoryCycle(pinned: pg.Client, id: number): Steps {
  return [
    [
      "try-lock",
      async () => {
        if (!(await ask(pinned, TRY_LOCK, id))) broken(`advisory lock ${id} refused`);
      },
    ],
    [
      "unlock",
      async () => {
        if (!(await ask(pinned, UNLOCK, id))) broken(`advisory unlock ${id} found no lock`);
      },
    ],
  ];
}

export function failedTryLockLoop(pinned: pg.Client, heldId: number): Steps {
  return [
    [
      "failed try-lock",
      async () => {
        if (await ask(pinned, TRY_LOCK, heldId)) broken(`advisory lock ${heldId} granted twice`);
      },
    ],
  ];
}

export function stepOf(steps: Steps, label: string): () => Promise<unknown> {
  const step = steps.find(([name]) => name === label);
  if (!step) throw new Error(`no step ${label}`);
  return step[1];
}

export function nth<T>(list: readonly T[], index: number): T {
  const item = list[index];
  if (item === undefined) throw new Error(`no item ${index}`);
  return item;
}

export async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: "pglease-bench" });
  // A connection dropped while idle (server stopped on Ctrl-C) must not crash the run before cleanup;
  // a dropped connection during a statement still fails that statement.
  client.on("error", () => {});
  await client.connect();
  return client;
}
