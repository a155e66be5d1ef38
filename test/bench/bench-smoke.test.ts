// The bench's figure groups with a handful of iterations against the test database: the JSON
// has the promised shape, every figure is a positive number, and nothing is left connected.
// No timing assertions: this machine's speed is not under test.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeDatabase } from "../../bench/database.ts";
import { failoverSvg } from "../../bench/failover-chart.ts";
import type { BenchContext, Budget, GroupResult } from "../../bench/group.ts";
import { type ClusterFigures, runClusters } from "../../bench/groups/clusters.ts";
import { runFootprint } from "../../bench/groups/footprint.ts";
import { runLeaseOps } from "../../bench/groups/lease-ops.ts";
import type { LeaseOpsFigures } from "../../bench/groups/lease-ops-tables.ts";
import { type PeerFigures, runPeers } from "../../bench/groups/peers.ts";
import { runScale } from "../../bench/groups/scale.ts";
import { runTakeover, type TakeoverFigures } from "../../bench/groups/takeover.ts";
import type { LatencyStats } from "../../bench/measure.ts";
import { liveCandidates } from "../../bench/peers/candidates.ts";
import { stopKubeFixtures } from "../../bench/peers/kube-fixture.ts";
import { ratioText, renderTable } from "../../bench/report.ts";
import { type ResultsDocument, resultsDocument, writeResults } from "../../bench/results.ts";
import { TARGETS } from "../../bench/targets.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

const TINY: Budget = {
  warmup: 2,
  iterations: 8,
  maxMsPerFigure: 10_000,
  leaseCounts: [1, 20],
  batchedTicks: 2,
  oneEachTicks: 1,
  startups: 2,
  peerTiming: {
    name: "tiny (lease 2 s, renew deadline 1.5 s, retry 300 ms)",
    leaseMs: 2_000,
    renewDeadlineMs: 1_500,
    retryMs: 300,
  },
  crashTrials: 1,
  gracefulTrials: 1,
  slowLanes: 1,
  steadyWindowMs: 2_000,
  cliStartups: 1,
  electorCounts: [1, 20],
  electorRenewIntervals: 2,
};

let db: TestDatabase;
let outDir: string;
let document: ResultsDocument;
const results: GroupResult[] = [];

function expectPositiveLatency(stats: LatencyStats): void {
  expect(stats.samples).toBeGreaterThan(0);
  for (const value of [stats.p50Ms, stats.p99Ms, stats.meanMs, stats.opsPerSec]) {
    expect(value).toBeGreaterThan(0);
    expect(Number.isFinite(value)).toBe(true);
  }
  expect(stats.p99Ms).toBeGreaterThanOrEqual(stats.p50Ms);
}

/** Backends of the bench database other than the asking one; pools end asynchronously on the server side. */
async function otherConnections(): Promise<number> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    for (let attempt = 0; ; attempt++) {
      const { rows } = await client.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
      );
      const n = rows[0]?.n ?? -1;
      if (n === 0 || attempt >= 100) return n;
      await new Promise((resolve) => setImmediate(resolve));
    }
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
  outDir = await mkdtemp(join(tmpdir(), "pglease-bench-"));
  const context: BenchContext = {
    databaseUrl: db.url,
    budget: TINY,
    signal: new AbortController().signal,
    progress: () => {},
  };
  results.push(
    await runLeaseOps(context),
    await runScale(context),
    await runFootprint(context),
    await runPeers(context),
    await runTakeover(context),
    await runClusters(context),
  );
  const path = join(outDir, "results", "latest.json");
  await writeResults(
    path,
    resultsDocument({
      startedAt: new Date(),
      loadAtStart: 0,
      mode: "quick",
      command: "test",
      database: await describeDatabase(db.url, "test"),
      results,
    }),
  );
  document = JSON.parse(await readFile(path, "utf8")) as ResultsDocument;
}, 300_000);

afterAll(async () => {
  await stopKubeFixtures();
  await rm(outDir, { recursive: true, force: true });
  await db.drop();
});

describe("bench results document", () => {
  it("describes the machine and the database without the connection string", () => {
    expect(document.schemaVersion).toBe(2);
    const [run] = document.runs;
    expect(document.runs).toHaveLength(1);
    expect(run?.groups).toEqual(["lease-ops", "scale", "footprint", "peers", "takeover", "clusters"]);
    expect(run?.machine.cpus).toBeGreaterThan(0);
    expect(run?.machine.cpuModel).not.toBe("");
    expect(run?.machine.node).toBe(process.version);
    expect(run?.machine.loadAverage.atEnd).toBeGreaterThanOrEqual(0);
    expect(run?.database.version).toMatch(/^\d+/);
    expect(run?.database.settings.synchronous_commit).toBeDefined();
    expect(JSON.stringify(document)).not.toContain(db.url);
    expect(Object.keys(document.groups)).toEqual([
      "lease-ops",
      "scale",
      "footprint",
      "peers",
      "takeover",
      "clusters",
    ]);
  });

  it("has every lease statement, ours and the advisory lock's, in every setup, with positive figures", () => {
    const figures = document.groups["lease-ops"] as LeaseOpsFigures;
    const setups = new Set(figures.operations.map((f) => f.setup));
    expect(setups.size).toBe(3);
    for (const setup of setups) {
      const here = figures.operations.filter((f) => f.setup === setup);
      expect(here.map((f) => `${f.statements}/${f.operation}`).sort()).toEqual(
        [
          ...["claim", "release", "renew", "read", "failed claim"].flatMap((op) => [
            `named/${op}`,
            `unnamed/${op}`,
          ]),
          ...["try-lock", "unlock", "failed try-lock"].map((op) => `named, pinned connection/${op}`),
        ].sort(),
      );
    }
    for (const figure of figures.operations) expectPositiveLatency(figure.latency);
    expect(figures.ratios).toHaveLength(27);
    for (const r of figures.ratios) {
      expect(r.factor).toBeGreaterThan(0);
      expect(r.byMean).toBeGreaterThan(0);
      expect(r.text).toMatch(/^\d+(\.\d)?× (faster|slower)$/);
    }
  });

  it("measures the WAL of every statement; lease writes always write some", () => {
    // The WAL position is server-wide and other test files write concurrently, so zero is not asserted.
    const wal = (document.groups["lease-ops"] as LeaseOpsFigures).walBytesPerOp;
    expect(Object.keys(wal).sort()).toEqual(
      ["claim", "release", "renew", "read", "failed claim", "try-lock", "unlock", "failed try-lock"].sort(),
    );
    for (const bytes of Object.values(wal)) expect(bytes).toBeGreaterThanOrEqual(0);
    for (const op of ["claim", "release", "renew", "failed claim"]) expect(wal[op]).toBeGreaterThan(0);
  });

  it("measures the history's cost: latency and WAL with and without it; renewals write none", () => {
    const { history } = document.groups["lease-ops"] as LeaseOpsFigures;
    for (const variant of ["with", "without"] as const) {
      for (const op of ["claim", "release", "renew"] as const) {
        expectPositiveLatency(history.latency[variant][op]);
        expectPositiveLatency(history.latencyNoFlush[variant][op]);
        expect(history.walBytes[variant][op]).toBeGreaterThan(0);
      }
    }
    expect(history.historyRowsFromRenewals).toBe(0);
  });

  it("renews every held lease per tick: one statement batched, one per lease otherwise", () => {
    const scale = document.groups.scale as Awaited<ReturnType<typeof runScale>>["figures"];
    expect(scale.sizes.map((s) => s.leases)).toEqual([1, 20]);
    for (const size of scale.sizes) {
      expect(size.batched.statementsPerTick).toBe(1);
      expect(size.oneEach.statementsPerTick).toBe(size.leases);
      for (const ticks of [size.batched, size.oneEach]) {
        expectPositiveLatency(ticks.tick);
        expect(ticks.cpuMsPerTick).toBeGreaterThan(0);
        expect(ticks.cpuMsPerSecondAtDefaultRenew).toBeGreaterThan(0);
      }
      expect(size.ratio.factor).toBeGreaterThan(0);
      expect(size.memory.rssMb).toBeGreaterThan(0);
      expect(size.memory.heapUsedMb).toBeGreaterThan(0);
    }
  });

  it("runs openLeases' electors at every count: all leading, renew statements counted by kind", () => {
    const scale = document.groups.scale as Awaited<ReturnType<typeof runScale>>["figures"];
    expect(scale.electors.map((e) => e.leases)).toEqual([1, 20]);
    for (const figure of scale.electors) {
      expect(figure.allLeading).toBe(true);
      expect(figure.acquireAllMs).toBeGreaterThan(0);
      expect(figure.renewStatementsPerInterval).toBeGreaterThan(0);
      expect(figure.statements.renew + figure.statements.renewMany).toBeGreaterThan(0);
      expect(figure.closeAllMs).toBeGreaterThan(0);
      expect(figure.closeStatements).toBe(1);
      // close() split at its one release statement: sent, then answered, then done, in that order.
      const split = figure.closeSplit;
      expect(split).toBeTruthy();
      expect(split?.sentMs).toBeGreaterThan(0);
      expect(split?.cpuBeforeSentMs).toBeGreaterThan(0);
      expect(split?.answeredMs).toBeGreaterThan(split?.sentMs ?? Infinity);
      expect(figure.closeAllMs).toBeGreaterThanOrEqual(split?.answeredMs ?? Infinity);
    }
  });

  it("times a graceful handover step by step: the follower's notice leads straight to a claim", () => {
    const { handover } = document.groups["lease-ops"] as LeaseOpsFigures;
    expect(handover.trials).toBe(TINY.gracefulTrials);
    expect(handover.firstStatement).toBe("claim");
    for (const step of [handover.release, handover.claim, handover.stopToHeld]) expectPositiveLatency(step);
  });

  it("times elector start-up until the first acquired, on a connected and on a new pool", () => {
    const footprint = document.groups.footprint as Awaited<ReturnType<typeof runFootprint>>["figures"];
    expectPositiveLatency(footprint.startup.connectedPool);
    expectPositiveLatency(footprint.startup.newPool);
  });

  it("times pglease run from spawn to acquired and reads its memory, outside a cluster and publishing", () => {
    const footprint = document.groups.footprint as Awaited<ReturnType<typeof runFootprint>>["figures"];
    expect(footprint.cli).toHaveLength(2);
    for (const variant of footprint.cli) {
      expectPositiveLatency(variant.startup);
      expect(variant.rssMb.samples).toBe(1);
      expect(variant.rssMb.meanMb).toBeGreaterThan(0);
      expect(variant.peakRssMb).toBeGreaterThanOrEqual(variant.rssMb.maxMb);
    }
  });

  it("renders every table with as many cells per row as columns", () => {
    expect(document.tables.length).toBeGreaterThanOrEqual(4);
    for (const table of document.tables) {
      expect(table.rows.length).toBeGreaterThan(0);
      for (const row of table.rows) expect(row).toHaveLength(table.columns.length);
      expect(renderTable(table)).toContain(table.title);
    }
  });

  it("leaves no connection open in the bench database and no candidate process running", async () => {
    expect(await otherConnections()).toBe(0);
    expect(liveCandidates()).toBe(0);
  });
});

describe("peers: failover and steady-state cost side by side", () => {
  const peers = () => document.groups.peers as PeerFigures;

  // The real client-go runs where scripts/build-kube-apiserver.sh has built it; else it is not measured.
  const clientGo = () => peers().kube.clientGo !== null;
  const measurable = (system: string) => clientGo() || !system.startsWith("client-go");

  it("says which API server and client-go ran, or why client-go was not measured", () => {
    if (clientGo()) expect(peers().kube.clientGo).toMatch(/^k8s\.io\/client-go v\d/);
    else expect(peers().kube.reason).toMatch(/\w/);
  });

  it("times every system's crash and every variant's graceful handover, on the clocks that apply", () => {
    expect(peers().series.map((s) => `${s.event}/${s.system}`)).toEqual(
      [
        "crash/pglease",
        "crash/client-go",
        "crash/advisory-lock",
        "graceful/pglease",
        "graceful/pglease-no-notify",
        "graceful/client-go-release",
        "graceful/client-go",
        "graceful/advisory-lock",
      ].filter((name) => measurable(name.split("/")[1] as string)),
    );
    for (const series of peers().series) {
      expect(series.trials).toHaveLength(1);
      expect(series.holds.p50Ms).toBeGreaterThan(0);
      expect(series.holds.p99Ms).toBeGreaterThanOrEqual(series.holds.p50Ms);
      // Labelled (pglease) or shown in the Lease (client-go); the advisory lock has nothing to show.
      if (series.system === "advisory-lock") expect(series.published).toBeNull();
      else expect(series.published?.p50Ms).toBeGreaterThan(0);
      const fromExpiry = series.expiryToClaim;
      if (series.event === "crash" && series.system === "pglease") {
        // A claim can only win once the old term has expired on the server.
        expect(fromExpiry?.minMs).toBeGreaterThanOrEqual(0);
      } else {
        expect(fromExpiry).toBeNull();
      }
    }
  });

  it("counts each system's steady-state cost per pod where it has one", () => {
    const cost = (id: string) => peers().steady.find((s) => s.system === id);
    expect(peers().steady.map((s) => s.system)).toEqual(
      ["pglease", "pglease-no-notify", "client-go", "advisory-lock"].filter(measurable),
    );
    expect(cost("pglease")?.statements?.perPodPerHour).toBeGreaterThan(0);
    expect(cost("pglease-no-notify")?.statements?.perFollowerPerHour).toBeGreaterThan(0);
    expect(cost("pglease")?.connections?.pinnedPerPod).toBe(1);
    if (clientGo()) {
      expect(cost("client-go")?.statements).toBeNull();
      expect(cost("client-go")?.apiRequests?.perPodPerHour).toBeGreaterThan(0);
    }
    expect(cost("advisory-lock")?.apiRequests).toBeNull();
    expect(cost("advisory-lock")?.connections).toEqual({ totalPerPod: 1, pinnedPerPod: 1 });
    for (const system of peers().steady) {
      expect(system.rssMbPerPod).toBeGreaterThan(0);
      // client-go exits when it loses its lease (a tiny renew deadline on a loaded host can): it is counted, not hidden.
      expect(system.podsRunningAtEnd).toBeGreaterThan(0);
      expect(system.podsRunningAtEnd).toBeLessThanOrEqual(system.pods);
      if (system.system !== "client-go") expect(system.podsRunningAtEnd).toBe(system.pods);
    }
  });

  it("states ratios, judges every target it measured, and draws every trial in the chart", () => {
    expect(peers().ratios.length).toBeGreaterThan(0);
    for (const r of peers().ratios) expect(r.text).toMatch(/^\d+(\.\d)?× (faster|slower|fewer|more)$/);
    expect(document.targets.map((t) => t.id)).toEqual(TARGETS.map((t) => t.id));
    for (const target of document.targets) {
      // This run has no 10,000 electors, no rollout group (test/bench/rollout-smoke.test.ts runs
      // it) and no real-cluster group (it boots the real cluster: `npm run bench` only); everything
      // else the targets read, it measured.
      const measured = !["scale.electors[leases=10000]", "rollout.", "real-cluster."].some((p) =>
        target.figure.startsWith(p),
      );
      expect(target.verdict === "not measured").toBe(!measured);
    }
    const svg = failoverSvg(peers());
    expect(svg.startsWith("<svg")).toBe(true);
    expect(svg.match(/<circle /g)).toHaveLength(peers().series.reduce((n, s) => n + s.trials.length, 0));
    for (const series of peers().series)
      expect(svg).toContain(series.label.replace(/&/g, "&amp;").slice(0, 10));
  });
});

describe("takeover: crash failover without waiting out the lease", () => {
  const takeover = () => document.groups.takeover as TakeoverFigures;
  const clientGo = () => takeover().kube.clientGo !== null;

  it("restarts the SIGKILLed leader in place for every system, timing the new term against the restart", () => {
    expect(takeover().restart.map((s) => s.system)).toEqual(
      ["pglease", "client-go", "client-go-same-identity", "advisory-lock"].filter(
        (system) => clientGo() || !system.startsWith("client-go"),
      ),
    );
    for (const series of takeover().restart) {
      expect(series.trials).toHaveLength(1);
      const [trial] = series.trials;
      expect(trial?.holdsMs).toBeGreaterThan(0);
      expect(trial?.startMs).toBeGreaterThan(0);
      expect(trial?.overStartMs).toBeCloseTo((trial?.holdsMs ?? 0) - (trial?.startMs ?? 0), 6);
      expect(series.restartedLed).toBe(trial?.restartedLeads ? 1 : 0);
    }
    // With its own identity the restarted client-go renews what it finds as its own: it always leads.
    const sameIdentity = takeover().restart.find((s) => s.system === "client-go-same-identity");
    if (clientGo()) expect(sameIdentity?.restartedLed).toBe(1);
  });

  it("times the session takeover after a SIGKILL without restart against the follower retry interval", () => {
    const [series] = takeover().crash;
    expect(series?.system).toBe("pglease-session-takeover");
    expect(series?.trials).toHaveLength(1);
    expect(series?.holds.p50Ms).toBeGreaterThan(0);
    expect(series?.overRetry.p50Ms).toBeCloseTo((series?.holds.p50Ms ?? 0) - TINY.peerTiming.retryMs, 6);
  });
});

describe("clusters: failover with the candidates in two clusters", () => {
  it("times a crash and a graceful handover, the new leader labelled in its own cluster", () => {
    const { series } = document.groups.clusters as ClusterFigures;
    expect(series.map((s) => `${s.event}/${s.system}`)).toEqual([
      "crash/pglease-two-clusters",
      "graceful/pglease-two-clusters",
    ]);
    for (const s of series) {
      expect(s.trials).toHaveLength(1);
      expect(s.holds.p50Ms).toBeGreaterThan(0);
      expect(s.published?.p50Ms).toBeGreaterThan(0);
    }
  });
});

describe("ratio text", () => {
  it("says faster or slower with one decimal below 10× and none above", () => {
    expect(ratioText(1.44)).toBe("1.4× faster");
    expect(ratioText(0.5)).toBe("2.0× slower");
    expect(ratioText(27.4)).toBe("27× faster");
    expect(ratioText(Number.NaN)).toBe("n/a");
  });
});
