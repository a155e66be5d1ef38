// Candidates and planned handover through the library, several processes' lease stacks on one
// real PostgreSQL: the leader hears the request, ends its work, runs beforeRelease and releases;
// the named candidate claims first; a stopping leader reserves for its best successor.
import { afterAll, beforeAll, expect, it } from "vitest";
import { HandoverRefused } from "../../src/candidacy/plan.ts";
import { readHistory } from "../../src/lease/history-store.ts";
import { type Leases, openLeases } from "../../src/open-leases.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";

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
    expect(eb.isLeader()).toBe(true);
    expect(result.fence).toBe(eb.status().fence);
    // c has the higher priority and listens too: the reservation kept it out.
    expect(events).toEqual(["a: work ended", "a: demoted", "b: acquired"]);
    const history = await readHistory(a.store.pool, a.store.table, { key: "k", limit: 10 });
    expect(history.at(-1)).toMatchObject({ holder: "b", previousHolder: "a", reason: "handover" });
    // Without --to: the best live candidate by priority.
    expect(await b.handover("k")).toMatchObject({ from: "b", to: { holder: "c" } });
    expect(ec.isLeader()).toBe(true);
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
    await expect.poll(() => ed.status().lastOutcome).toBe("not-campaigning");
    expect(ed.status()).toMatchObject({ role: "follower", leader: null, notCampaigning: "no-lead mode" });
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
