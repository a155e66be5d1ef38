// The single-node cluster: boot (up), complete teardown (down), and what is running (status).
// Every component runs on the host's filesystem but in the node's network namespace (nsenter
// --net, not `ip netns exec`, which would give each its own mount namespace: the kubelet's volume
// mounts must be the ones containerd's runc sees). up records in state.json what it found and
// started before it changes anything, so down can undo a boot that failed half-way.
import { execFile, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, open, readdir, readFile, rm, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { auditLog, configFiles, RUNC, writeConfigs } from "./configs.ts";
import { importImage, pauseImage } from "./images.ts";
import {
  BASE,
  CLUSTER_RANGE,
  COMPONENTS,
  type Component,
  GUARD_CHAIN,
  HOST_LINK,
  HOST_PATHS,
  HOST_SYSCTLS,
  KUBERNETES_SERVICE_IP,
  logFile,
  NETNS,
  NODE_IP,
  NODE_NAME,
  paths,
  SERVICE_CIDR,
} from "./layout.ts";
import { createNodeNetwork, guardDrops, netnsExists, removeNodeNetwork } from "./network.ts";
import { generatePki, kubeconfigFor, pki } from "./pki.ts";
import { type ClusterTools, clusterTools } from "./tools.ts";

const run = promisify(execFile);

interface State {
  /** Host sysctls as up found them. */
  sysctls: Record<string, string>;
  /** HOST_PATHS that did not exist before up: down removes them. */
  createdPaths: string[];
  pids: Partial<Record<Component, number>>;
  binaries: Partial<Record<Component, string>>;
  /** The test process that booted the node and tears it down; null: booted by hand (`npm run cluster -- up`). */
  owner: number | null;
}

async function readState(): Promise<State | null> {
  return readFile(paths.state, "utf8").then(
    (text) => JSON.parse(text) as State,
    () => null,
  );
}
const saveState = (state: State) => writeFile(paths.state, JSON.stringify(state, null, 2));

export interface BootReport {
  /** From the first component started to a Ready node. */
  bootMs: number;
  logs: Record<Component, string>;
}

/**
 * Who holds the node: "none", "hand" (booted with `npm run cluster -- up`, left to its user),
 * "live" (a test run that is still running and will tear it down) or "stale" (a test run that died).
 */
export async function holder(): Promise<"none" | "hand" | "live" | "stale"> {
  const state = await readState();
  if (!state) return (await netnsExists()) ? "stale" : "none";
  if (state.owner === null || state.owner === undefined) return "hand";
  return alive(state.owner) ? "live" : "stale";
}

export async function up(
  log: (line: string) => void = console.log,
  owner: number | null = null,
): Promise<BootReport> {
  const tools = await clusterTools();
  if ((await netnsExists()) || existsSync(paths.state)) {
    throw new Error(`a cluster is already up (or was not torn down): run \`npm run cluster -- down\` first`);
  }
  for (const hierarchy of await cgroupHierarchies()) {
    if (existsSync(join(hierarchy, "kubepods"))) {
      throw new Error(`${hierarchy}/kubepods exists: another kubelet runs (or ran) on this host`);
    }
  }
  await rm(BASE, { recursive: true, force: true });
  for (const dir of [paths.pki, paths.config, paths.logs, paths.apiserver, paths.containerd, paths.kubelet]) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  }
  await mkdir(paths.cniConf, { recursive: true });
  const state: State = { sysctls: await readSysctls(), createdPaths: [], pids: {}, binaries: {}, owner };
  state.createdPaths = HOST_PATHS.filter((p) => !existsSync(p));
  await saveState(state);

  await Promise.all([generatePki(), writeConfigs()]);
  await createNodeNetwork();
  const started = performance.now();
  log(`node network namespace ${NETNS}: node ${NODE_IP}, pods and Services in 10.213.0.0/16`);

  const start = async (component: Component, binary: string, args: string[]) => {
    const out = await open(logFile(component), "a");
    const child = spawn("nsenter", [`--net=/run/netns/${NETNS}`, "--", binary, ...args], {
      detached: true,
      stdio: ["ignore", out.fd, out.fd],
      // containerd finds its shim on PATH, the shim finds runc by BinaryName, kube-proxy iptables.
      env: { ...process.env, PATH: `${tools.dir}:/usr/sbin:/usr/bin:/sbin:/bin` },
    });
    child.unref();
    await out.close();
    if (child.pid === undefined) throw new Error(`${component} did not start`);
    state.pids[component] = child.pid;
    state.binaries[component] = binary;
    await saveState(state);
  };

  await start("containerd", join(tools.dir, "containerd"), ["--config", configFiles.containerd]);
  await start("kube-apiserver", tools.apiserver, ["--dir", paths.apiserver, "--", ...apiServerFlags()]);
  await waitFor(
    "containerd",
    60_000,
    async () => {
      await run(join(tools.dir, "ctr"), ["--address", paths.containerdSocket, "version"]);
      return true;
    },
    state,
  );
  await importImage(tools, await pauseImage(tools));
  const kubectl = kubectlFor(tools);
  await waitFor(
    "kube-apiserver",
    120_000,
    async () => (await kubectl(["get", "--raw", "/readyz"])) === "ok",
    state,
  );

  const controller = kubeconfigFor("controller-manager");
  const scheduler = kubeconfigFor("scheduler");
  await start("kube-controller-manager", join(tools.dir, "kube-controller-manager"), [
    `--kubeconfig=${controller}`,
    `--authentication-kubeconfig=${controller}`,
    `--authorization-kubeconfig=${controller}`,
    "--bind-address=127.0.0.1",
    "--leader-elect=false",
    "--use-service-account-credentials=true",
    `--service-account-private-key-file=${pki.serviceAccountKey}`,
    `--root-ca-file=${pki.caCert}`,
    `--cluster-signing-cert-file=${pki.caCert}`,
    `--cluster-signing-key-file=${pki.caKey}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
  ]);
  await start("kube-scheduler", join(tools.dir, "kube-scheduler"), [
    `--kubeconfig=${scheduler}`,
    `--authentication-kubeconfig=${scheduler}`,
    `--authorization-kubeconfig=${scheduler}`,
    "--bind-address=127.0.0.1",
    "--leader-elect=false",
  ]);
  await start("kubelet", join(tools.dir, "kubelet"), [
    `--config=${configFiles.kubelet}`,
    `--kubeconfig=${kubeconfigFor("kubelet")}`,
    `--hostname-override=${NODE_NAME}`,
    `--node-ip=${NODE_IP}`,
    `--root-dir=${paths.kubelet}`,
    `--cert-dir=${join(paths.kubelet, "pki")}`,
  ]);
  await start("kube-proxy", join(tools.dir, "kube-proxy"), [`--config=${configFiles.kubeProxy}`]);
  await waitFor(
    "a Ready node",
    120_000,
    async () => {
      const ready = await kubectl([
        "get",
        "node",
        NODE_NAME,
        "-o",
        `jsonpath={.status.conditions[?(@.type=="Ready")].status}`,
      ]).catch(() => "");
      return ready === "True";
    },
    state,
  );
  const bootMs = Math.round(performance.now() - started);
  const logs = Object.fromEntries(COMPONENTS.map((c) => [c, logFile(c)])) as Record<Component, string>;
  return { bootMs, logs };
}

function apiServerFlags(): string[] {
  // Appended after kube-apiserver-go's own flags: for a single-valued flag the last one wins.
  return [
    "--bind-address=0.0.0.0",
    `--advertise-address=${NODE_IP}`,
    "--secure-port=6443",
    `--tls-cert-file=${pki.serverCert}`,
    `--tls-private-key-file=${pki.serverKey}`,
    `--client-ca-file=${pki.caCert}`,
    // A list flag: appended to kube-apiserver-go's RBAC, so Node then RBAC.
    "--authorization-mode=Node",
    "--enable-admission-plugins=NodeRestriction",
    `--service-account-key-file=${pki.serviceAccountPublicKey}`,
    `--service-account-signing-key-file=${pki.serviceAccountKey}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    // The `kubernetes` Service's endpoint is the node's address, which pods reach through kube-proxy.
    "--endpoint-reconciler-type=lease",
    "--allow-privileged=true",
    // Logs and exec: the kubelet is reached on the node's InternalIP (it has no resolvable name).
    "--kubelet-preferred-address-types=InternalIP",
    `--kubelet-client-certificate=${pki.cert("apiserver-kubelet-client")}`,
    `--kubelet-client-key=${pki.key("apiserver-kubelet-client")}`,
    ...(auditLog ? [`--audit-policy-file=${configFiles.auditPolicy}`, `--audit-log-path=${auditLog}`] : []),
  ];
}

export function kubectlFor(tools: ClusterTools) {
  return async (args: string[], input?: string): Promise<string> => {
    const child = run(join(tools.dir, "kubectl"), [`--kubeconfig=${paths.adminKubeconfig}`, ...args], {
      maxBuffer: 64 * 1024 * 1024,
    });
    if (input !== undefined) {
      child.child.stdin?.end(input);
    }
    return (await child).stdout.trim();
  };
}

async function waitFor(
  what: string,
  timeoutMs: number,
  check: () => Promise<boolean>,
  state?: State,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    for (const [component, pid] of Object.entries(state?.pids ?? {})) {
      if (!alive(pid)) {
        throw new Error(
          `${component} exited while waiting for ${what}; its log: ${logFile(component as Component)}`,
        );
      }
    }
    try {
      if (await check()) return;
    } catch (error) {
      last = (error as Error).message.trim().split("\n").slice(-2).join(" | ");
    }
    // Polling processes that give no other signal; 200 ms is small next to their start-up.
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(
    `${what}: not ready after ${timeoutMs} ms${last ? ` (${last})` : ""}; logs in ${paths.logs}`,
  );
}

export interface TeardownReport {
  teardownMs: number;
  /** Packets of the cluster's range the host guard dropped on the way out: must be 0. */
  guardDrops: number | null;
  /** Host sysctls still not as up found them after down put them back ("key: before -> now"): must be empty. */
  sysctlsNotRestored: string[];
}

/** Tears everything down that up made or that the components made; safe to run twice. */
export async function down(log: (line: string) => void = console.log): Promise<TeardownReport> {
  const started = performance.now();
  const state = await readState();
  const pids = state?.pids ?? {};
  const binaries = state?.binaries ?? {};
  // The kubelet first (so it restarts nothing), then what runs in the pods, then the shims.
  await stop([pids.kubelet], binaries, 15_000);
  await stop([pids["kube-proxy"], pids["kube-scheduler"], pids["kube-controller-manager"]], binaries, 15_000);
  await killPodProcesses();
  await killShims();
  await stop([pids.containerd, pids["kube-apiserver"]], binaries, 20_000);
  await unmountUnder([BASE, ...(state?.createdPaths ?? [])]);
  await removePodCgroups();
  const drops = await guardDrops();
  await removeNodeNetwork();
  const sysctlsNotRestored = state ? await restoreSysctls(state.sysctls) : [];
  for (const p of state?.createdPaths ?? []) await rm(p, { recursive: true, force: true });
  // The logs stay for a look after the fact; the next up removes them.
  for (const entry of await readdir(BASE).catch(() => [] as string[])) {
    if (join(BASE, entry) !== paths.logs) await rm(join(BASE, entry), { recursive: true, force: true });
  }
  const teardownMs = Math.round(performance.now() - started);
  log(`cluster down in ${teardownMs} ms; guard drops: ${drops ?? "no guard"}; logs kept in ${paths.logs}`);
  return { teardownMs, guardDrops: drops, sysctlsNotRestored };
}

/**
 * What of the cluster is still on the machine, one line each (empty once down has run): its state,
 * network namespace, host link and route, guard chain, pod cgroups, mounts under its folder, and
 * processes (a component names the cluster's folder on its command line; a pod's process is in a
 * kubepods cgroup).
 */
export async function leftovers(): Promise<string[]> {
  const found: string[] = [];
  if (existsSync(paths.state)) found.push(`state file ${paths.state}`);
  if (await netnsExists()) found.push(`network namespace ${NETNS}`);
  if ((await guardDrops()) !== null) found.push(`iptables chain ${GUARD_CHAIN} (mangle)`);
  const link = await run("ip", ["-o", "link", "show", HOST_LINK]).catch(() => null);
  if (link?.stdout.trim()) found.push(`host interface ${HOST_LINK}`);
  const route = await run("ip", ["route", "show", CLUSTER_RANGE]).catch(() => null);
  if (route?.stdout.trim()) found.push(`host route ${route.stdout.trim()}`);
  for (const cgroup of await podCgroups()) found.push(`pod cgroup ${cgroup}`);
  const mountinfo = await readFile("/proc/self/mountinfo", "utf8");
  for (const line of mountinfo.split("\n")) {
    const point = (line.split(" ")[4] ?? "").replace(/\\040/g, " ");
    if (point === BASE || point.startsWith(`${BASE}/`)) found.push(`mount ${point}`);
  }
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const args = (await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "")).split("\0");
    if (args.some((arg) => arg === BASE || arg.includes(`${BASE}/`))) {
      found.push(`process ${entry}: ${args.join(" ").trim().slice(0, 160)}`);
    }
  }
  return found;
}

/** Running, and not a zombie waiting to be reaped. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** SIGTERM, then SIGKILL after the bound; only pids whose program is still the one started. */
async function stop(
  list: (number | undefined)[],
  binaries: Partial<Record<Component, string>>,
  boundMs: number,
): Promise<void> {
  const ours = new Set(Object.values(binaries));
  const targets: number[] = [];
  for (const pid of list) {
    if (pid === undefined || !alive(pid)) continue;
    const exe = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (![...ours].some((binary) => exe.startsWith(`${binary}\0`))) continue;
    targets.push(pid);
    process.kill(pid, "SIGTERM");
  }
  const deadline = Date.now() + boundMs;
  while (targets.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  for (const pid of targets.filter(alive)) process.kill(pid, "SIGKILL");
  while (targets.some(alive)) await new Promise((r) => setTimeout(r, 50));
}

async function cgroupHierarchies(): Promise<string[]> {
  const mounts = await readFile("/proc/self/mounts", "utf8");
  return mounts
    .split("\n")
    .map((line) => line.split(" "))
    .filter((fields) => fields[2] === "cgroup" || fields[2] === "cgroup2")
    .map((fields) => fields[1] ?? "")
    .filter(Boolean);
}

/** Every cgroup under kubepods, deepest first. */
async function podCgroups(): Promise<string[]> {
  const found: string[] = [];
  const walk = async (dir: string) => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) if (entry.isDirectory()) await walk(join(dir, entry.name));
    found.push(dir);
  };
  for (const hierarchy of await cgroupHierarchies()) {
    if (existsSync(join(hierarchy, "kubepods"))) await walk(join(hierarchy, "kubepods"));
  }
  return found;
}

/** The pods' processes: all in kubepods cgroups, which only this cluster's kubelet makes. */
async function killPodProcesses(): Promise<void> {
  const cgroups = await podCgroups();
  // A frozen container (a suite's frozen leader) takes SIGKILL only once thawed.
  for (const cgroup of cgroups) {
    if (existsSync(join(cgroup, "freezer.state"))) {
      await writeFile(join(cgroup, "freezer.state"), "THAWED").catch(() => undefined);
    }
  }
  for (let round = 0; round < 50; round++) {
    const pids = new Set<number>();
    for (const cgroup of cgroups) {
      const text = await readFile(join(cgroup, "cgroup.procs"), "utf8").catch(() => "");
      for (const pid of text.split("\n").filter(Boolean)) pids.add(Number(pid));
    }
    if (pids.size === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone already.
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** containerd's shims for this cluster: their command line names its socket. */
async function killShims(): Promise<void> {
  const shims: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    const args = cmdline.split("\0");
    if (args[0]?.endsWith("containerd-shim-runc-v2") && args.includes(paths.containerdSocket)) {
      shims.push(Number(entry));
    }
  }
  for (const pid of shims) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Exited since the scan: its container's process was its last.
    }
  }
  while (shims.some(alive)) await new Promise((r) => setTimeout(r, 50));
}

async function unmountUnder(roots: string[]): Promise<void> {
  const mountinfo = await readFile("/proc/self/mountinfo", "utf8");
  const points = mountinfo
    .split("\n")
    .map((line) => (line.split(" ")[4] ?? "").replace(/\\040/g, " "))
    .filter((point) => roots.some((root) => point === root || point.startsWith(`${root}/`)));
  // Deepest first; lazily, so a mount still busy for a moment does not stop the teardown.
  for (const point of [...new Set(points)].sort((a, b) => b.length - a.length)) {
    await run("umount", ["-l", point]).catch(() => undefined);
  }
}

async function removePodCgroups(): Promise<void> {
  for (let round = 0; round < 50; round++) {
    const left: string[] = [];
    for (const cgroup of await podCgroups()) {
      await rmdir(cgroup).catch(() => left.push(cgroup));
    }
    if (left.length === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`pod cgroups left behind: ${(await podCgroups()).join(", ")}`);
}

async function readSysctls(): Promise<Record<string, string>> {
  const values: Record<string, string> = {};
  for (const key of HOST_SYSCTLS) {
    const value = await readFile(`/proc/sys/${key.replaceAll(".", "/")}`, "utf8").catch(() => null);
    if (value !== null) values[key] = value.trim();
  }
  return values;
}

/** Puts back what up found; answers those still different after, read back ("key: before -> now"). */
async function restoreSysctls(saved: Record<string, string>): Promise<string[]> {
  const now = await readSysctls();
  for (const [key, value] of Object.entries(saved)) {
    if (now[key] !== value)
      await writeFile(`/proc/sys/${key.replaceAll(".", "/")}`, value).catch(() => undefined);
  }
  const after = await readSysctls();
  return Object.entries(saved)
    .filter(([key, value]) => after[key] !== value)
    .map(([key, value]) => `${key}: ${value} -> ${after[key]}`);
}

export async function status(): Promise<string> {
  const state = await readState();
  if (!state) return `no cluster (no ${paths.state})`;
  const lines = COMPONENTS.map((c) => {
    const pid = state.pids[c];
    return `${c.padEnd(24)} ${pid !== undefined && alive(pid) ? `pid ${pid}` : "not running"}  log ${logFile(c)}`;
  });
  lines.push(`admin kubeconfig        ${paths.adminKubeconfig}`);
  lines.push(`kubernetes Service      ${KUBERNETES_SERVICE_IP}`);
  lines.push(`guard drops             ${await guardDrops()}`);
  lines.push(`runc                    ${RUNC}`);
  return lines.join("\n");
}

/** Resident memory of the node's components plus its pods' memory cgroup, in MiB (a figure for the docs). */
export async function memoryMiB(): Promise<{ components: number; pods: number }> {
  const state = await readState();
  let kib = 0;
  for (const pid of Object.values(state?.pids ?? {})) {
    const status = await readFile(`/proc/${pid}/status`, "utf8").catch(() => "");
    kib += Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  }
  const pods = await readFile("/sys/fs/cgroup/memory/kubepods/memory.usage_in_bytes", "utf8").catch(
    () => "0",
  );
  return { components: Math.round(kib / 1024), pods: Math.round(Number(pods) / 2 ** 20) };
}
