// pglease candidates and pglease handover against real `pglease run` processes on a real
// PostgreSQL: who campaigns, a handover to a named pod, refusals that name the live candidates,
// and a SIGTERM that hands over to the best successor.
import { expect, it } from "vitest";
import { fatalText, runPglease, startShortLeaseRun } from "../support/processes/cli.ts";
import { cliSuite } from "../support/processes/cli-suite.ts";

const suite = cliSuite();

interface CandidateLine {
  pod: string;
  holder: string;
  priority: number;
  revision: string | null;
  leads: boolean;
  live: boolean;
  leader: boolean;
}

async function candidates(env: NodeJS.ProcessEnv): Promise<CandidateLine[]> {
  const out = await runPglease(["candidates", "moves", "--json"], env);
  expect(out.code).toBe(0);
  return (JSON.parse(out.stdout) as { candidates: CandidateLine[] }).candidates;
}

it("lists the candidates, hands over to a named pod, refuses one that is not live, and hands over on SIGTERM", async () => {
  const env = { DATABASE_URL: suite.db.url };
  const pod = (name: string, revision: string) => ({ ...env, POD_NAME: name, POD_REVISION: revision });
  const a = suite.track((await startShortLeaseRun("moves", pod("pod-a", "r1"))).run);
  await a.waitForLog(/^acquired lease moves/);
  const b = suite.track((await startShortLeaseRun("moves", pod("pod-b", "r2"), ["--priority", "3"])).run);
  const c = suite.track((await startShortLeaseRun("moves", pod("pod-c", "r2"), ["--no-lead"])).run);
  await b.waitForLog(/^lease moves is held by/);
  await c.waitForLog(/^not campaigning for lease moves .*: no-lead mode$/);
  await expect
    .poll(async () => (await candidates(env)).filter((x) => x.live).length, { timeout: 10_000 })
    .toBe(3);
  expect((await candidates(env)).map((x) => [x.pod, x.priority, x.revision, x.leads, x.leader])).toEqual([
    ["pod-b", 3, "r2", true, false],
    ["pod-a", 0, "r1", true, true],
    ["pod-c", 0, "r2", false, false],
  ]);
  const table = await runPglease(["candidates"], env);
  expect(table.stdout).toMatch(
    /^LEASE\s+POD\s+HOLDER\s+PRIORITY\s+REVISION\s+LEADS\s+LIVE\s+ROLE\s+LAST SEEN$/m,
  );
  expect(table.stdout).toMatch(/^moves\s+pod-a\s+pod-a-\S+\s+0\s+r1\s+yes\s+yes\s+leader\s/m);

  const refused = await runPglease(["handover", "moves", "--to", "pod-c"], env);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(
    /^pglease handover: cannot hand over lease moves to pod-c: not a live candidate; the live candidates are pod-b \(pod-b-\S+, priority 3\)\n$/,
  );
  expect((await runPglease(["handover"], env)).code).toBe(2);

  const moved = await runPglease(["handover", "moves", "--to", "pod-b", "--json"], env);
  expect(moved.code).toBe(0);
  const done = JSON.parse(moved.stdout) as {
    from: string;
    to: string;
    pod: string;
    fence: number;
    tookMs: number;
  };
  expect(done).toMatchObject({ pod: "pod-b" });
  expect(done.from).toMatch(/^pod-a-/);
  await a.waitForLog(/^handed over lease moves \(fence \d+\): handover to pod-b-/);

  // SIGTERM of the leader: its best successor (the only other that leads) takes it by handover.
  await b.stop("SIGTERM");
  const reasons = async () => {
    const history = await runPglease(["history", "moves", "--json"], env);
    return (JSON.parse(history.stdout) as { history: Array<{ reason: string }> }).history.map(
      (e) => e.reason,
    );
  };
  // The target of a handover a moment ago takes the next one at once, though its own handover's
  // reservation (10 s) has not passed (it failed before: its gate stayed closed until then).
  await expect
    .poll(reasons, { timeout: 10_000 })
    .toEqual(["claim", "release", "handover", "release", "handover"]);
});

it("refuses --preempt with --no-lead and a priority out of range, every problem together", async () => {
  const out = await runPglease(["run", "--lease", "x", "--preempt", "--no-lead", "--priority", "1001"], {
    DATABASE_URL: suite.db.url,
  });
  expect(out.code).toBe(2);
  expect(fatalText(out)).toMatch(/--priority.*"1001" must be a whole number from 0 to 1000/);
  expect(fatalText(out)).toMatch(/--preempt and --no-lead contradict each other/);
});
