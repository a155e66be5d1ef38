// pglease_transitions_total counts a gain under the history table's word for it: a planned
// handover is "handover" there, and must be here too, not the elector's generic "acquired".
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Leases, openLeases } from "../../src/leases/open-leases.ts";
import { SidecarMetrics } from "../../src/observability/metrics.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

it("a handover is counted as reason=handover on the pod that takes the lease", async () => {
  const open = (name: string) =>
    openLeases({
      connectionString: db.url,
      holder: name,
      pod: { name: `${name}-pod` },
      restartTakeover: false,
    });
  const stacks: Leases[] = [await open("a"), await open("b")];
  const [a, b] = stacks as [Leases, Leases];
  try {
    const ea = a.campaign("k");
    await expect.poll(() => ea.isLeader()).toBe(true);
    const eb = b.campaign("k");
    const metrics = new SidecarMetrics({ version: "test" }, ["k"]);
    metrics.watch(eb);
    await expect.poll(async () => (await a.candidates("k")).filter((x) => x.live).length).toBe(2);
    await a.handover("k", { to: "b-pod" });
    expect(eb.isLeader()).toBe(true);
    const text = await metrics.registry.metrics();
    expect(text).toContain('pglease_transitions_total{lease="k",direction="gained",reason="handover"} 1');
    expect(text).toContain('pglease_transitions_total{lease="k",direction="gained",reason="acquired"} 0');
  } finally {
    for (const leases of stacks) await leases.close();
  }
});
