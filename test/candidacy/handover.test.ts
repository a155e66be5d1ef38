// Candidates and planned handover through the library, several processes' lease stacks on one
// real PostgreSQL: the leader hears the request, ends its work, runs beforeRelease and releases;
// the named candidate claims first; a stopping leader's release reserves for its best successor.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { HandoverRefused } from "../../src/candidacy/plan.ts";
import { type Leases, openLeases } from "../../src/leases/open-leases.ts";
import { readHistory } from "../../src/postgres/history-store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const open = (name: string, revision: string | null = null) =>
  openLeases({
    connectionString: db.url,
    holder: name,
    pod: { name: `${name}-pod` },
    revision,
    restartTakeover: false,
  });

async function closeAll(all: Leases[]): Promise<void> {
  for (const leases of all) await leases.close();
}

it("hands over to the named candidate, which claims first; the leader's work and beforeRelease end before", async () => {
  const events: string[] = [];
  const [a, b, c] = await Promise.all([open("a"), open("b"), open("c")]);
  try {
    const ea = a.campaign("k", {
      lead: ({ signal }) =>
        new Promise<void>((resolve) =>
          signal.addEventListener("abort", () => resolve(), { once: true }),
        ).then(() => events.push("a: work ended")),
      beforeRelease: async () => {
        events.push("a: demoted");
      },
    });
    await expect.poll(() => ea.isLeader()).toBe(true);
    const eb = b.campaign("k", { priority: 1 });
    const ec = c.campaign("k", { priority: 5 });
    ec.on("transition", (t) => t.outcome === "acquired" && events.push("c: acquired"));
    eb.on("transition", (t) => t.outcome === "acquired" && events.push("b: acquired"));
    await expect.poll(async () => (await a.candidates("k")).filter((x) => x.live).length).toBe(3);
    expect((await a.candidates("k")).map((x) => [x.pod, x.priority])).toEqual([
      ["c-pod", 5],
      ["b-pod", 1],
      ["a-pod", 0],
    ]);

    const result = await a.handover("k", { to: "b-pod" });
    expect(result).toMatchObject({ from: "a", to: { holder: "b" } });
    // handover() answers once the row names b; b's elector applies its own claim's answer in its
    // own turn (in another process, in general), so its belief follows, it does not precede.
    await expect.poll(() => eb.isLeader()).toBe(true);
    expect(result.fence).toBe(eb.status().fence);
    // c has the higher priority and listens too: the reservation kept it out.
    expect(events).toEqual(["a: work ended", "a: demoted", "b: acquired"]);
    const history = await readHistory(a.store.pool, a.store.table, { key: "k", limit: 10 });
    expect(history.at(-1)).toMatchObject({ holder: "b", previousHolder: "a", reason: "handover" });
    // Without --to: the best live candidate by priority.
    expect(await b.handover("k")).toMatchObject({ from: "b", to: { holder: "c" } });
    await expect.poll(() => ec.isLeader()).toBe(true);
  } finally {
    await closeAll([a, b, c]);
  }
});

it("refuses a handover to a candidate that is not live, or that never leads, naming the live ones", async () => {
  const [a, b, d] = await Promise.all([open("a2"), open("b2"), open("d2")]);
  try {
    const ea = a.campaign("k2");
    await expect.poll(() => ea.isLeader()).toBe(true);
    b.campaign("k2");
    const ed = d.campaign("k2", { noLead: true });
    await expect.poll(async () => (await a.candidates("k2")).filter((x) => x.live).length).toBe(3);
    const refused = await a.handover("k2", { to: "nobody" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(HandoverRefused);
    expect(String(refused)).toMatch(
      /to nobody: not a live candidate; the live candidates are b2-pod \(b2, priority 0\)$/,
    );
    await expect(a.handover("k2", { to: "d2" })).rejects.toThrow(/not a live candidate/);
    await expect(a.handover("absent")).rejects.toThrow(/lease absent is not held: nothing to hand over/);
    // No-lead mode: it never claims, even a free lease.
    await a.close();
    await b.close();
    // It hears the last release and looks: the lease is free, and it still does not claim.
    await expect.poll(() => ed.status().leader, { timeout: 5_000 }).toBeNull();
    expect(ed.status()).toMatchObject({ role: "follower", leader: null, notCampaigning: "no-lead mode" });
    expect((await d.store.read("k2"))?.ttlMs).toBeLessThanOrEqual(0);
  } finally {
    await closeAll([a, b, d]);
  }
});

it("a stopping leader reserves the lease for its best successor: priority, then the newest revision", async () => {
  const old = await open("old", "rev-1");
  const peer = await open("peer", "rev-1");
  const fresh = await open("fresh", "rev-2");
  try {
    const eo = old.campaign("k3");
    await expect.poll(() => eo.isLeader()).toBe(true);
    peer.campaign("k3");
    // The new revision's pod starts later, as in a rollout.
    await expect.poll(async () => (await old.candidates("k3")).filter((x) => x.live).length).toBe(2);
    const ef = fresh.campaign("k3");
    await expect.poll(async () => (await old.candidates("k3")).filter((x) => x.live).length).toBe(3);
    await old.close();
    await expect.poll(() => ef.isLeader()).toBe(true);
    const history = await readHistory(fresh.store.pool, fresh.store.table, { key: "k3", limit: 10 });
    expect(history.at(-1)).toMatchObject({ holder: "fresh", reason: "handover" });
    // Its row is gone with it.
    expect((await fresh.candidates("k3")).map((x) => x.holder).sort()).toEqual(["fresh", "peer"]);
  } finally {
    await closeAll([old, peer, fresh]);
  }
});

it("a stopping leader of many leases sends one statement, which ends each term and reserves it for its successor", async () => {
  const pool = new pg.Pool({ connectionString: db.url, max: 4 });
  // Every statement any client of the pool sends (pool.query and the store's checked-out clients alike).
  const sent: string[] = [];
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    client.query = ((...args: unknown[]) => {
      const config = args[0] as { text?: string } | string;
      sent.push(typeof config === "string" ? config : (config.text ?? ""));
      return query(...args);
    }) as typeof client.query;
  });
  const many = await openLeases({ pool, holder: "many", pod: { name: "many-pod" }, restartTakeover: false });
  const successor = await open("successor");
  const keys = ["m0", "m1", "m2", "m3", "m4"];
  try {
    const electors = keys.map((key) => many.campaign(key));
    await expect.poll(() => electors.every((e) => e.isLeader())).toBe(true);
    // A successor for three of the five: the other two are released to nobody.
    const followers = keys.slice(0, 3).map((key) => successor.campaign(key));
    await expect
      .poll(async () => (await many.candidates()).filter((x) => x.holder === "successor" && x.live).length)
      .toBe(3);
    sent.length = 0;
    await many.close();
    // Before the fold: a read of the candidates, a reserve per key with one, then the release.
    const leaseStatements = sent.filter((text) => !/^\s*DELETE FROM \S+_candidates/.test(text));
    expect(leaseStatements).toHaveLength(1);
    expect(leaseStatements[0]).toContain("unnest(");
    await expect.poll(() => followers.every((e) => e.isLeader())).toBe(true);
    for (const key of keys.slice(0, 3)) {
      const history = await readHistory(successor.store.pool, successor.store.table, { key, limit: 10 });
      expect(history.at(-1)).toMatchObject({ holder: "successor", reason: "handover" });
    }
  } finally {
    await closeAll([many, successor]);
    await pool.end();
  }
});

it("refuses a successor reservation that is not 0 or a whole number of milliseconds, naming it", async () => {
  for (const successorReservationMs of [2.5, -1, Number.NaN]) {
    await expect(openLeases({ connectionString: db.url, successorReservationMs })).rejects.toThrow(
      `successorReservationMs must be 0 (release to any candidate) or a positive whole number of milliseconds, got ${successorReservationMs}`,
    );
  }
});

it("refuses a history retention whose bounds are not positive whole numbers (entries up to the CLI's 10,000,000), naming them", async () => {
  const openWith = (historyRetention: { maxAgeMs: number; maxRowsPerKey: number }) =>
    openLeases({ connectionString: db.url, restartTakeover: false, historyRetention });
  for (const maxRowsPerKey of [0, -1, 2.5, 10_000_001, Number.NaN]) {
    await expect(openWith({ maxAgeMs: 60_000, maxRowsPerKey })).rejects.toThrow(
      `historyRetention.maxRowsPerKey must be a whole number of entries from 1 to 10000000, got ${maxRowsPerKey}`,
    );
  }
  for (const maxAgeMs of [0, -1, 2.5, Number.POSITIVE_INFINITY]) {
    await expect(openWith({ maxAgeMs, maxRowsPerKey: 10 })).rejects.toThrow(
      `historyRetention.maxAgeMs must be a positive whole number of milliseconds, got ${maxAgeMs}`,
    );
  }
});

const quick = (name: string) =>
  openLeases({
    connectionString: db.url,
    holder: name,
    pod: { name: `${name}-pod` },
    restartTakeover: false,
    statementTimeoutMs: 500,
    successorReservationMs: 0,
  });
const QUICK = { leaseDurationMs: 3_000, retryIntervalMs: 1_000 };

it("priority: a free lease goes to the higher candidate; the lower one waits a retry interval, and says so", async () => {
  const [a, low, high] = await Promise.all([quick("a4"), quick("low4"), quick("high4")]);
  try {
    const ea = a.campaign("k4", QUICK);
    await expect.poll(() => ea.isLeader()).toBe(true);
    const eh = high.campaign("k4", { ...QUICK, priority: 5 });
    await expect.poll(async () => (await a.candidates("k4")).length).toBe(2);
    const el = low.campaign("k4", QUICK);
    const waited: string[] = [];
    el.on("tick", (t) => t.outcome === "not-campaigning" && waited.push(t.sentence));
    // The lower one learns of the higher one from its own announcement, and stops claiming.
    await expect
      .poll(() => waited.at(-1), { timeout: 5_000 })
      .toMatch(/waiting one retry interval for a live candidate of priority 5/);
    // Released to anyone (no successor reservation): the higher one claims first.
    await a.close();
    await expect.poll(() => eh.isLeader()).toBe(true);
    await expect.poll(() => el.status().leader, { timeout: 3_000 }).toBe("high4");
    expect(el.isLeader()).toBe(false);
  } finally {
    await closeAll([a, low, high]);
  }
});

it("priority never preempts a live leader, unless the higher candidate asks with preempt", async () => {
  const [a, high, pre] = await Promise.all([quick("a5"), quick("high5"), quick("pre5")]);
  try {
    const ea = a.campaign("k5", QUICK);
    await expect.poll(() => ea.isLeader()).toBe(true);
    high.campaign("k5", { ...QUICK, priority: 5 });
    await expect.poll(async () => (await a.candidates("k5")).length).toBe(2);
    // The higher candidate refreshes (and so learns who leads) twice: the leader stays.
    const seenAt = async () =>
      (await a.candidates("k5")).find((c) => c.holder === "high5")?.seenAt.getTime() ?? 0;
    const first = await seenAt();
    await expect.poll(seenAt, { timeout: 5_000 }).toBeGreaterThan(first);
    const second = await seenAt();
    await expect.poll(seenAt, { timeout: 5_000 }).toBeGreaterThan(second);
    expect(ea.isLeader()).toBe(true);
    const ep = pre.campaign("k5", { ...QUICK, priority: 9, preempt: true });
    await expect.poll(() => ep.isLeader(), { timeout: 5_000 }).toBe(true);
    const history = await readHistory(a.store.pool, a.store.table, { key: "k5", limit: 10 });
    expect(history.at(-1)).toMatchObject({ holder: "pre5", previousHolder: "a5", reason: "handover" });
  } finally {
    await closeAll([a, high, pre]);
  }
});

it("a stopping leader of higher priority hands over at once: its successor's priority wait stands aside for the reservation", async () => {
  const slow = (name: string) =>
    openLeases({
      connectionString: db.url,
      holder: name,
      pod: { name: `${name}-pod` },
      restartTakeover: false,
      statementTimeoutMs: 500,
    });
  // A retry interval far beyond the reservation (5 s): waiting it out would leave the lease leaderless.
  const SLOW = { leaseDurationMs: 60_000, retryIntervalMs: 30_000 };
  const [top, b, c] = await Promise.all([slow("top6"), slow("b6"), slow("c6")]);
  try {
    const et = top.campaign("k6", { ...SLOW, priority: 5 });
    await expect.poll(() => et.isLeader()).toBe(true);
    const eb = b.campaign("k6", SLOW);
    await expect.poll(async () => (await top.candidates("k6")).length).toBe(2);
    c.campaign("k6", SLOW);
    await expect.poll(async () => (await top.candidates("k6")).length).toBe(3);
    await top.close();
    // b campaigned longest of the two left: the release reserved the lease for it.
    await expect.poll(() => eb.isLeader(), { timeout: 4_000 }).toBe(true);
    const history = await readHistory(b.store.pool, b.store.table, { key: "k6", limit: 10 });
    expect(history.at(-1)).toMatchObject({ holder: "b6", previousHolder: "top6", reason: "handover" });
  } finally {
    await closeAll([top, b, c]);
  }
});
