// The pglease-sidecar library chart in a real cluster, the way a team adds it to a chart of its
// own, following deploy/examples/existing-chart/README.md: the example copied without its charts/
// folder (a link into this repository), its dependency pointed at this clone's library (what a
// release's OCI repository would be; no registry is reachable here), `helm dependency update`
// packaging the library into its charts/, the Secret the values name created, then
// `helm install orders`, with only the images (the one built here) and the application's command
// changed. It proves what the library's templates give that chart: pods Ready with the native
// sidecar, exactly one labelled leader with its fence annotation, the example's leader Service
// routing to it alone (its EndpointSlice and a request through its ClusterIP), the application
// reading its role and fence from the files the library mounts, and a deleted leader handed over
// with never two ready leader endpoints: the RBAC, the admission policy, the peer selector and the
// grace period all real.
import { randomBytes } from "node:crypto";
import { cp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../support/kube/chart.ts";
import { watchEndpoints } from "./endpoint-timeline.ts";
import { guardDrops } from "./network.ts";
import { type Answer, APP_PORT, get, type Release } from "./release.ts";
import { releaseSuite } from "./release-suite.ts";
import { clusterSkipReason, describePods, type PodView, pods, readyEndpoints, until } from "./session.ts";

const SUITE = "cluster library chart";
const skip = (await clusterSkipReason(SUITE)) !== null;
const example = join(repoRoot, "deploy", "examples", "existing-chart");
const library = join(repoRoot, "charts", "pglease-sidecar");
/** The team's own chart: the example copied as its README says (made by the values hook). */
const ownChart = join(tmpdir(), `pglease-library-chart-${randomBytes(3).toString("hex")}`, "orders");
/** The example's own replica count (its values.yaml). */
const REPLICAS = 2;

/** The example's names, installed as `orders` as its README does. */
const exampleRelease = (namespace: string): Release => ({
  name: "orders",
  namespace,
  selector: "app.kubernetes.io/name=orders,app.kubernetes.io/instance=orders",
  leaderService: "orders-leader",
  workload: "orders",
});

/**
 * The application: answers with its pod's name (the pod's hostname), and /leader-info with the
 * role and fence files it reads where the library's LEADER_INFO_DIR says. It exits on SIGTERM (as
 * PID 1, Node would ignore it and hold the pod for the whole grace period).
 */
const APP_SERVER = [
  `const file = (f) => { try { return require("node:fs").readFileSync(process.env.LEADER_INFO_DIR + "/" + f, "utf8"); } catch { return ""; } };`,
  `require("node:http").createServer((q, s) => s.end(q.url === "/leader-info"`,
  `? JSON.stringify({ role: file("role"), fence: file("fence") }) : require("node:os").hostname())).listen(${APP_PORT});`,
  `process.on("SIGTERM", () => process.exit(0));`,
].join(" ");

describe.skipIf(skip)("the library chart, in the example chart, in a real cluster", () => {
  let installStarted: number;
  const cluster = releaseSuite({
    suite: SUITE,
    replicas: REPLICAS,
    namespacePrefix: "e2e-lib",
    chart: { dir: ownChart, release: exampleRelease },
    async values(_base, namespace) {
      // The README's steps: the example without its charts/ link, the dependency's repository set.
      await cp(example, ownChart, { recursive: true, filter: (path) => path !== join(example, "charts") });
      const chartYaml = join(ownChart, "Chart.yaml");
      const declared = await readFile(chartYaml, "utf8");
      const pointed = declared.replace(/repository: file:\/\/\S+/, `repository: file://${library}`);
      if (pointed === declared)
        throw new Error(`${chartYaml}: no file:// repository to point at the library`);
      await writeFile(chartYaml, pointed);
      const updateStarted = performance.now();
      await cluster.session.helm(["dependency", "update", ownChart]);
      figures.dependencyUpdateMs = Math.round(performance.now() - updateStarted);
      // The README's next step: the Secret the example's values name (database.existingSecret).
      await cluster.session.kubectl([
        "create",
        "secret",
        "generic",
        "orders-database",
        "-n",
        namespace,
        `--from-literal=DATABASE_URL=${cluster.bridge.podUrl}`,
      ]);
      figures.bootMs = cluster.session.bootMs;
      installStarted = performance.now();
      const colon = cluster.session.image.reference.lastIndexOf(":");
      const image = {
        repository: cluster.session.image.reference.slice(0, colon),
        tag: cluster.session.image.reference.slice(colon + 1),
      };
      // Only the images and the application's command differ from the example's values.
      return { image, command: ["node", "-e", APP_SERVER], pglease: { sidecar: { image } } };
    },
    cleanUp: () => rm(join(ownChart, ".."), { recursive: true, force: true }),
    async ready() {
      await until(
        `${REPLICAS} pods Ready`,
        180_000,
        () => pods(cluster.session, cluster.release.namespace, cluster.selector),
        (list) => list.length === REPLICAS && list.every((p) => p.ready),
      ).catch(async (error: Error) => {
        throw new Error(
          `${error.message}\n${await describePods(cluster.session, cluster.release.namespace, cluster.selector)}`,
        );
      });
      figures.installToAllReadyMs = Math.round(performance.now() - installStarted);
    },
  });
  const { figures } = cluster;

  const leaders = (list: PodView[]) => list.filter((p) => p.labels["pglease.io/role"] === "leader");
  const podList = () => pods(cluster.session, cluster.release.namespace, cluster.selector);
  const clusterIp = () =>
    cluster.session.kubectl([
      "get",
      "service",
      cluster.release.leaderService,
      "-n",
      cluster.release.namespace,
      "-o",
      "jsonpath={.spec.clusterIP}",
    ]);

  it("installed the library as helm dependency update packaged it into the chart's charts/", async () => {
    expect((await readdir(join(ownChart, "charts"))).sort()).toEqual(["pglease-sidecar-0.1.0.tgz"]);
    const output = await cluster.session.helm(["dependency", "list", ownChart]);
    // "ok": the archive under charts/ is the version Chart.yaml declares.
    expect(output).toMatch(/^pglease-sidecar\s+0\.1\.0\s+\S+\s+ok\s*$/m);
  });

  it("runs every pod Ready with its native sidecar, exactly one labelled leader with its fence annotation", async () => {
    const list = await until("one labelled leader", 60_000, podList, (l) => leaders(l).length === 1);
    expect(list.filter((p) => p.ready)).toHaveLength(REPLICAS);
    const [leader] = leaders(list);
    expect(Number(leader?.annotations["pglease.io/fence"])).toBeGreaterThan(0);
    // The library's default: a native sidecar (an init container restarted always).
    const spec = JSON.parse(
      await cluster.session.kubectl([
        "get",
        "pod",
        leader?.name ?? "",
        "-n",
        cluster.release.namespace,
        "-o",
        "json",
      ]),
    ).spec as { initContainers?: { name: string; restartPolicy?: string }[] };
    expect(spec.initContainers?.find((c) => c.name === "pglease")?.restartPolicy).toBe("Always");
  });

  it("lists exactly the leader pod in the leader Service's EndpointSlice", async () => {
    const [leader] = leaders(await podList());
    const endpoints = await until(
      "the leader Service's endpoints",
      30_000,
      () => readyEndpoints(cluster.session, cluster.release.namespace, cluster.release.leaderService),
      (names) => names.length === 1,
    );
    expect(endpoints).toEqual([leader?.name]);
  });

  it("routes requests to the leader Service's ClusterIP to the leader, which reads its role and fence from the library's files", async () => {
    const [leader] = leaders(await podList());
    const ip = await clusterIp();
    // kube-proxy writes its rules about once a second: wait for them, then every answer is the leader's.
    const started = performance.now();
    await until(
      "an answer through the ClusterIP",
      30_000,
      () => get(ip, 80),
      (a) => a.ok,
    );
    figures.firstAnswerThroughClusterIpMs = Math.round(performance.now() - started);
    for (let i = 0; i < 10; i++) expect(await get(ip, 80)).toEqual({ ok: true, body: leader?.name });
    // The kubelet refreshes the downward API files after the label and annotation: wait for them.
    const fence = leader?.annotations["pglease.io/fence"];
    const info = await until(
      "the leader's role and fence files",
      60_000,
      () => get(ip, 80, 2_000, "/leader-info"),
      (a) => a.ok && a.body === JSON.stringify({ role: "leader", fence }),
    );
    expect(info).toEqual({ ok: true, body: JSON.stringify({ role: "leader", fence }) });
  });

  it("hands the leader Service over when the leader pod is deleted, never with two ready endpoints", async () => {
    const ip = await clusterIp();
    const list = await until(
      "every pod Ready with one leader",
      180_000,
      podList,
      (l) => l.length === REPLICAS && l.every((p) => p.ready) && leaders(l).length === 1,
    );
    const old = leaders(list)[0];
    if (!old) throw new Error("no leader");
    const timeline = await watchEndpoints(cluster.release.namespace, cluster.release.leaderService);
    try {
      await timeline.waitFor((ready) => ready.join() === old.name, 30_000);
      // A client through the ClusterIP all along: a refusal (kube-proxy REJECTs a Service with no
      // ready endpoint) counts as "no leader routed", not as an error to retry away.
      const answers: { atMs: number; answer: Answer }[] = [];
      let clientRuns = true;
      const client = (async () => {
        while (clientRuns) {
          answers.push({ atMs: performance.now(), answer: await get(ip, 80, 1_000) });
          await sleep(50);
        }
      })();
      const deletedAt = performance.now();
      await cluster.session.kubectl([
        "delete",
        "pod",
        old.name,
        "-n",
        cluster.release.namespace,
        "--wait=false",
      ]);
      const handedOver = await timeline
        .waitFor((ready) => ready.length === 1 && ready[0] !== old.name, 120_000)
        .catch(async (error: Error) => {
          throw new Error(
            `${error.message}\n${await describePods(cluster.session, cluster.release.namespace, cluster.selector)}`,
          );
        });
      const successor = handedOver.ready[0];
      const reached = await until(
        "an answer from the new leader through the ClusterIP",
        30_000,
        async () => answers.find((a) => a.atMs > deletedAt && a.answer.ok && a.answer.body === successor),
        (a) => a !== undefined,
      ).finally(() => {
        clientRuns = false;
      });
      await client;
      const end = performance.now();
      figures.leaderDeleted = {
        leaderlessMs: Math.round(timeline.durationWhere((r) => r.length === 0, deletedAt, end)),
        twoReadyMs: Math.round(timeline.durationWhere((r) => r.length >= 2, deletedAt, end)),
        newLeaderEndpointMs: Math.round(handedOver.atMs - deletedAt),
        clusterIpToNewLeaderMs: Math.round((reached?.atMs ?? end) - deletedAt),
        refusedRequests: answers.filter((a) => a.atMs >= deletedAt && !a.answer.ok).length,
      };
      expect(timeline.durationWhere((r) => r.length >= 2, deletedAt, end)).toBe(0);
      // Every answer came from the old leader or the new one, never from a follower.
      for (const { answer } of answers) if (answer.ok) expect([old.name, successor]).toContain(answer.body);
      // The new leader holds a new term: its fence annotation above the old leader's.
      const next = (await podList()).find((p) => p.name === successor);
      expect(next?.labels["pglease.io/role"]).toBe("leader");
      expect(Number(next?.annotations["pglease.io/fence"])).toBeGreaterThan(
        Number(old.annotations["pglease.io/fence"]),
      );
    } finally {
      timeline.stop();
    }
  }, 300_000);

  it("sent nothing of the cluster's addresses out of the machine (the host guard dropped nothing)", async () => {
    expect(await guardDrops()).toBe(0);
  });
});
