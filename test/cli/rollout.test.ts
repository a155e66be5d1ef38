// A rolling update of 3 replicas of `pglease run`, the test playing the Deployment controller
// (surge one new pod, once it campaigns stop one old pod; the leader first, the worst order):
// the stopping leader hands over to a pod of the newest revision, so leadership changes hands
// once per rollout, not once per old pod stopped.
import { expect, it } from "vitest";
import { type Running, runPglease, startShortLeaseRun } from "../support/processes/cli.ts";
import { cliSuite } from "../support/processes/cli-suite.ts";

const suite = cliSuite();

interface Change {
  holder: string | null;
  reason: string;
  changedAt: string;
}

it("a rollout of 3 replicas moves leadership once, to the new revision", async () => {
  const env = { DATABASE_URL: suite.db.url };
  const start = async (pod: string, revision: string) =>
    suite.track(
      (await startShortLeaseRun("rolled", { ...env, POD_NAME: pod, POD_TEMPLATE_HASH: revision })).run,
    );
  const live = async () => {
    const out = await runPglease(["candidates", "rolled", "--json"], env);
    return (JSON.parse(out.stdout) as { candidates: Array<{ pod: string; live: boolean; leader: boolean }> })
      .candidates;
  };
  const old = new Map<string, Running>();
  for (const pod of ["old-0", "old-1", "old-2"]) old.set(pod, await start(pod, "rev1"));
  await expect.poll(async () => (await live()).filter((c) => c.live).length, { timeout: 15_000 }).toBe(3);
  const leaderPod = async () => (await live()).find((c) => c.leader)?.pod;
  await expect.poll(leaderPod, { timeout: 10_000 }).toMatch(/^old-/);
  const history = async () => {
    const out = await runPglease(["history", "rolled", "--json"], env);
    return (JSON.parse(out.stdout) as { history: Change[] }).history;
  };
  const before = (await history()).length;

  for (let i = 0; i < 3; i++) {
    const pod = `new-${i}`;
    await start(pod, "rev2");
    await expect
      .poll(async () => (await live()).some((c) => c.pod === pod && c.live), { timeout: 15_000 })
      .toBe(true);
    // The controller's choice of which old pod goes: the leader first, while one is left.
    const leading = await leaderPod();
    const victim = leading && old.has(leading) ? leading : [...old.keys()][0];
    if (!victim) throw new Error("no old pod left");
    const stopped = await old.get(victim)?.stop("SIGTERM");
    expect(stopped?.code).toBe(0);
    old.delete(victim);
  }
  await expect.poll(leaderPod, { timeout: 10_000 }).toMatch(/^new-/);
  const changes = (await history()).slice(before).filter((c) => c.holder !== null);
  expect(changes.map((c) => c.reason)).toEqual(["handover"]);
});
