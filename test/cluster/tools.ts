// The cluster's programs, as the build scripts left them. Never builds (a cold build takes about
// 12 minutes): `bash scripts/build-kube-cluster.sh` and `bash scripts/build-kube-apiserver.sh` do.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");

export interface ClusterTools {
  /** kubelet, kube-controller-manager, kube-scheduler, kube-proxy, kubectl, containerd, its shim, ctr. */
  dir: string;
  /** The tests' kube-apiserver with its embedded etcd (test/kube-apiserver-go). */
  apiserver: string;
  helm: string;
}

export type ToolsAvailability = { ok: true; tools: ClusterTools } | { ok: false; reason: string };

const lastLine = (error: { stderr?: string; message: string }) =>
  (error.stderr || error.message).trim().split("\n").pop() ?? "unknown";

let availability: Promise<ToolsAvailability> | undefined;

/** Whether this machine can run the cluster, and with what; the reason in one line when not. */
export function clusterToolsAvailable(): Promise<ToolsAvailability> {
  availability ??= (async (): Promise<ToolsAvailability> => {
    if (process.platform !== "linux" || process.getuid?.() !== 0) {
      return { ok: false, reason: "the cluster needs Linux and root (network namespace, cgroups, mounts)" };
    }
    try {
      const dir = (
        await run("bash", [join(root, "scripts", "build-kube-cluster.sh"), "--path"])
      ).stdout.trim();
      const apiserver = (
        await run("bash", [join(root, "scripts", "build-kube-apiserver.sh"), "--path"])
      ).stdout.trim();
      await run("bash", [join(root, "test", "chart", "fetch-kube-tools.sh")]);
      return { ok: true, tools: { dir, apiserver, helm: join(root, ".tools", "helm", "helm") } };
    } catch (error) {
      return { ok: false, reason: lastLine(error as { stderr?: string; message: string }) };
    }
  })();
  return availability;
}

export async function clusterTools(): Promise<ClusterTools> {
  const available = await clusterToolsAvailable();
  if (!available.ok) throw new Error(available.reason);
  return available.tools;
}
