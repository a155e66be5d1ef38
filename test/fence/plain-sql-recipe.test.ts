// Runs the plain-SQL recipes exactly as docs/fencing.md prints them, so the page cannot drift into
// SQL that does not work.
import { readFile } from "node:fs/promises";
import type pg from "pg";
import { beforeAll, expect, it } from "vitest";
import { usePoolFixture } from "./pool-fixture.ts";

const fx = usePoolFixture();
let createGuardTable: string[];
let guardedTransaction: string[];
let rowFence: string[];

beforeAll(async () => {
  const doc = await readFile(new URL("../../docs/fencing.md", import.meta.url), "utf8");
  const blocks = [...doc.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => statementsOf(m[1] ?? ""));
  expect(blocks).toHaveLength(3);
  [createGuardTable, guardedTransaction, rowFence] = blocks as [string[], string[], string[]];
  await fx.pool.query("CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL)");
});

function statementsOf(block: string): string[] {
  return block
    .replace(/--[^\n]*/g, "")
    .split(";")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Values for $1..$n of a statement, from [fence, status, id]. */
async function run(client: pg.PoolClient, sql: string, values: unknown[]): Promise<pg.QueryResult> {
  const used = Math.max(0, ...[...sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
  return client.query(sql, values.slice(0, used));
}

async function guardedWrite(fence: number): Promise<"committed" | "stale"> {
  const client = await fx.pool.connect();
  try {
    for (const sql of guardedTransaction) {
      const result = await run(client, sql, [fence]);
      if (sql.startsWith("INSERT INTO pglease_fences") && result.rowCount === 0) {
        await client.query("ROLLBACK");
        return "stale";
      }
    }
    return "committed";
  } finally {
    client.release();
  }
}

it("guard table: the recipe commits the current term and refuses an older one", async () => {
  const client = await fx.pool.connect();
  try {
    for (const sql of createGuardTable) await client.query(sql);
  } finally {
    client.release();
  }
  await fx.pool.query("INSERT INTO orders VALUES (1, 'pending'), (2, 'pending')");
  expect(guardedTransaction[0]).toBe("BEGIN");
  // A writer frozen inside the transaction must not hold the guard row until it thaws.
  expect(guardedTransaction[1]).toBe("SET LOCAL idle_in_transaction_session_timeout = '10s'");
  expect(await guardedWrite(5)).toBe("committed");
  await fx.pool.query("UPDATE orders SET status = 'pending' WHERE id = 2");
  expect(await guardedWrite(4)).toBe("stale");
  expect((await fx.pool.query("SELECT status FROM orders WHERE id = 2")).rows).toEqual([
    { status: "pending" },
  ]);
  expect(await guardedWrite(5)).toBe("committed");
});

it("row fence: an equal fence updates, a lower one matches no row", async () => {
  const client = await fx.pool.connect();
  try {
    const [alter, update, upsert] = rowFence as [string, string, string];
    await client.query(alter);
    expect((await run(client, upsert, [7, "new", 10])).rowCount).toBe(1);
    expect((await run(client, update, [7, "again", 10])).rowCount).toBe(1);
    expect((await run(client, update, [6, "stale", 10])).rowCount).toBe(0);
    expect((await run(client, upsert, [6, "stale", 10])).rowCount).toBe(0);
    expect((await run(client, upsert, [8, "next term", 10])).rowCount).toBe(1);
    const { rows } = await client.query("SELECT status, fence::int FROM orders WHERE id = 10");
    expect(rows).toEqual([{ status: "next term", fence: 8 }]);
  } finally {
    client.release();
  }
});
