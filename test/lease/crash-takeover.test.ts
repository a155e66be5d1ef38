// The claim's crash clause on a real PostgreSQL: a claimer that carries the holders the kubelet
// reported dead takes a live term only while exactly one of them holds it, with a restart proof
// (a holder chosen by hand may be the next process's name too); the dead holder's late renew is
// refused, and the history names the takeover.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ClaimAnswer } from "../../src/election/ports.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
let pool: pg.Pool;
const MINUTE = 60_000;
const proof = (n: number) => `#r:${String(n).padStart(32, "0")}.${n}`;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 4 });
  await migrate(pool, new PgLeaseStore({ pool, statementTimeoutMs: 5_000 }).table);
});

afterAll(async () => {
  await pool.end();
  await db.drop();
});

const storeFor = (dead: readonly string[]) =>
  new PgLeaseStore({ pool, statementTimeoutMs: 5_000, crashedHolders: () => dead });

function fenceOf(answer: ClaimAnswer): number {
  if (!answer.won) throw new Error(`expected to win, ${answer.holder} holds it`);
  return answer.fence;
}

describe("crash clause of the claim", () => {
  it("takes a live term of a holder reported dead, at once and with a higher fence; its renew is refused after", async () => {
    const dead = `orders-0-1a2b3c4d${proof(1)}`;
    const fence = fenceOf(await storeFor([]).claim("crash-a", dead, MINUTE));
    const taken = await storeFor([dead]).claim("crash-a", `orders-1-5e6f7a8b${proof(2)}`, MINUTE);
    expect(fenceOf(taken)).toBeGreaterThan(fence);
    expect(await storeFor([]).renew("crash-a", dead, fence, MINUTE)).toEqual({ renewed: false });
    const { rows } = await pool.query(
      "SELECT reason, previous_holder FROM pglease_leases_history WHERE key = 'crash-a' ORDER BY id DESC LIMIT 1",
    );
    expect(rows[0]).toEqual({ reason: "crash-takeover", previous_holder: dead });
  });

  it("another holder reported dead (an earlier run of the same pod), or a holder without proof, protects the live term", async () => {
    const live = `orders-0-9c9c9c9c${proof(3)}`;
    fenceOf(await storeFor([]).claim("crash-b", live, MINUTE));
    const earlier = `orders-0-1a2b3c4d${proof(1)}`;
    const refused = await storeFor([earlier]).claim("crash-b", `orders-1-5e6f7a8b${proof(2)}`, MINUTE);
    expect(refused).toMatchObject({ won: false, holder: live });

    // A holder chosen by hand names no one process: even listed, it is never taken over early.
    fenceOf(await storeFor([]).claim("crash-c", "orders-0", MINUTE));
    expect(await storeFor(["orders-0"]).claim("crash-c", "orders-1", MINUTE)).toMatchObject({
      won: false,
      holder: "orders-0",
    });
  });

  it("a claim without reports writes no reason: a free lease's claim is still a claim", async () => {
    fenceOf(await storeFor([]).claim("crash-d", `orders-0-1a2b3c4d${proof(4)}`, MINUTE));
    const { rows } = await pool.query("SELECT reason FROM pglease_leases_history WHERE key = 'crash-d'");
    expect(rows).toEqual([{ reason: "claim" }]);
  });
});
