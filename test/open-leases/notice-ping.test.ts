// The notice connection's ping, counted on the wire by the bench's statement counter in front of a
// real PostgreSQL: an open lease stack with no campaign sends nothing but those pings, once per
// noticePingIntervalMs, and a bad interval is refused naming the option.
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type StatementCounter, startStatementCounter } from "../../bench/peers/statement-counter.ts";
import { openLeases } from "../../src/index.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
let counter: StatementCounter;
const quiet = { info: () => {}, warn: () => {} };

beforeAll(async () => {
  db = await createTestDatabase();
  counter = await startStatementCounter(db.url);
});
afterAll(async () => {
  await counter.close();
  await db.drop();
});

it("pings the notice connection once per noticePingIntervalMs, and not at all between pings", async () => {
  const leases = await openLeases({
    connectionString: counter.url(db.url),
    noticePingIntervalMs: 300,
    logger: quiet,
  });
  try {
    const opened = counter.counts().statements;
    await expect.poll(() => counter.counts().statements - opened, { timeout: 5_000, interval: 20 }).toBe(3);
    // Nothing else goes out between two pings.
    const third = counter.counts().statements;
    await sleep(150);
    expect(counter.counts().statements).toBe(third);
  } finally {
    await leases.close();
  }
});

it("refuses a notice ping interval that is not a positive number of milliseconds, naming it", async () => {
  await expect(openLeases({ connectionString: db.url, noticePingIntervalMs: 0 })).rejects.toThrow(
    /noticePingIntervalMs must be a positive number of milliseconds up to 2147483647, got 0/,
  );
});
