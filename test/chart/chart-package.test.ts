// The charts as the release publishes them: scripts/package-charts.sh (what
// .github/workflows/release.yml runs) packages the library and the chart, whose charts/ links the
// library, and the packaged chart is what gets installed: rendered like the folder, and installed
// by `helm install` from the archive into a real kube-apiserver.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BASE_VALUES, chartDir, helmPath, kubectlPath, kubeTools, repoRoot } from "../support/kube/chart.ts";
import {
  type RealKubeApiServer,
  realKubeApiServerAvailable,
  startRealKubeApiServer,
} from "../support/kube/real-kube-apiserver.ts";
import { skipBecause } from "../support/skip.ts";

const run = promisify(execFile);
const [tools, apiServer] = await Promise.all([kubeTools(), realKubeApiServerAvailable()]);

describe.skipIf(skipBecause("packaged chart", !tools.ok && tools.reason))("the packaged chart", () => {
  let dir: string;
  let archives: string[];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "pglease-charts-"));
    const { stdout } = await run(
      "bash",
      [join(repoRoot, "scripts", "package-charts.sh"), join(dir, "charts")],
      {
        env: { ...process.env, HELM: helmPath },
      },
    );
    archives = stdout.trim().split("\n");
    await writeFile(join(dir, "values.json"), JSON.stringify(BASE_VALUES));
  }, 120_000);
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("holds the library the chart links to, and renders as the folder does", async () => {
    const version = (await run(helmPath, ["show", "chart", chartDir])).stdout.match(/^version: (.+)$/m)?.[1];
    expect(archives).toEqual([
      join(dir, "charts", `pglease-sidecar-${version}.tgz`),
      join(dir, "charts", `pglease-${version}.tgz`),
    ]);
    const packaged = archives[1] ?? "";
    const listing = (await run("tar", ["-tzf", packaged])).stdout.split("\n");
    expect(listing).toContain("pglease/charts/pglease-sidecar/templates/_container.tpl");
    const template = (chart: string) =>
      run(helmPath, ["template", "web", chart, "-n", "shop", "-f", join(dir, "values.json")], {
        maxBuffer: 16 * 1024 * 1024,
      }).then((r) => r.stdout);
    expect(await template(packaged)).toBe(await template(chartDir));
  });

  describe.skipIf(
    skipBecause("packaged chart install", process.env.CI !== "true" && !apiServer.ok && apiServer.reason),
  )("helm install from the archive", () => {
    let server: RealKubeApiServer;
    beforeAll(async () => {
      server = await startRealKubeApiServer();
    }, 180_000);
    afterAll(() => server?.close());

    it("installs into a real kube-apiserver: the workload, its Services and its RBAC", async () => {
      const kubeconfig = ["--kubeconfig", server.info.kubeconfig];
      const installed = await run(
        helmPath,
        [
          "install",
          "web",
          archives[1] ?? "",
          "--namespace",
          "shop",
          "--create-namespace",
          "-f",
          join(dir, "values.json"),
          ...kubeconfig,
        ],
        { maxBuffer: 16 * 1024 * 1024 },
      );
      expect(installed.stdout).toMatch(/STATUS: deployed/);
      const { stdout } = await run(kubectlPath, [
        "get",
        "deployment,service,serviceaccount,role,rolebinding,poddisruptionbudget",
        "-n",
        "shop",
        "-l",
        "app.kubernetes.io/instance=web",
        "-o",
        "name",
        ...kubeconfig,
      ]);
      expect(stdout.trim().split("\n").sort()).toEqual(
        [
          "deployment.apps/web-pglease",
          "poddisruptionbudget.policy/web-pglease",
          "role.rbac.authorization.k8s.io/web-pglease",
          "rolebinding.rbac.authorization.k8s.io/web-pglease",
          "service/web-pglease-leader",
          "service/web-pglease-pods",
          "serviceaccount/web-pglease",
        ].sort(),
      );
      const listed = await run(helmPath, ["list", "-n", "shop", "-o", "json", ...kubeconfig]);
      expect(JSON.parse(listed.stdout)).toMatchObject([
        { name: "web", chart: expect.stringMatching(/^pglease-/) },
      ]);
    });
  });
});
