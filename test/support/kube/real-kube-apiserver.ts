// The real kube-apiserver over an embedded etcd (test/kube-apiserver-go, built by
// scripts/build-kube-apiserver.sh), as a child process: started, waited for until /readyz says
// so, and stopped with SIGTERM. What runs on it (namespaces, RBAC, pods) is in real-kube-cluster.ts.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { repoRoot } from "./chart.ts";

const run = promisify(execFile);

/** DIR/server.json, written by test/kube-apiserver-go/main.go. */
export interface ServerInfo {
  server: string;
  kubeconfig: string;
  caFile: string;
  servingCertFile: string;
  servingKeyFile: string;
  adminCertFile: string;
  adminKeyFile: string;
  etcd: string;
  kubernetesVersion: string;
  etcdVersion: string;
  pid: number;
}

export interface RealKubeApiServer {
  info: ServerInfo;
  /** The directory with the keys, etcd's data and the API server's log (kube-apiserver.log). */
  dir: string;
  /** A system:masters client: for setting up and for playing the kubelet, never for the code under test. */
  admin(): KubeConfig;
  /** From spawn to the first 200 from /readyz. */
  startupMs: number;
  close(): Promise<void>;
}

export type Availability = { ok: true; binary: string } | { ok: false; reason: string };

let availability: Promise<Availability> | undefined;

/**
 * The built binary, or why there is none. Never builds (a cold build takes many minutes):
 * `bash scripts/build-kube-apiserver.sh` does, and CI runs it first.
 */
export function realKubeApiServerAvailable(): Promise<Availability> {
  availability ??= run("bash", [join(repoRoot, "scripts", "build-kube-apiserver.sh"), "--path"]).then(
    ({ stdout }) => ({ ok: true as const, binary: stdout.trim() }),
    (error: { stderr?: string; message: string }) => ({
      ok: false as const,
      reason: (error.stderr || error.message).trim().split("\n").pop() ?? "unknown",
    }),
  );
  return availability;
}

export interface StartOptions {
  /** Extra kube-apiserver flags (an audit policy, say). */
  flags?: string[];
  /** How long start-up may take before it fails, naming the log (default 120 s). */
  timeoutMs?: number;
}

export async function startRealKubeApiServer(options: StartOptions = {}): Promise<RealKubeApiServer> {
  const available = await realKubeApiServerAvailable();
  if (!available.ok) throw new Error(available.reason);
  const dir = await mkdtemp(join(tmpdir(), "pglease-kube-apiserver-"));
  const log = await open(join(dir, "kube-apiserver.log"), "w");
  const started = performance.now();
  const child = spawn(available.binary, ["--dir", dir, "--", ...(options.flags ?? [])], {
    stdio: ["ignore", log.fd, log.fd],
  });
  await log.close();
  const exited = once(child, "exit");
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      await exited;
      clearTimeout(killer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const info = await waitForReady(dir, child, options.timeoutMs ?? 120_000);
    return {
      info,
      dir,
      admin: () => adminKubeConfig(info),
      startupMs: Math.round(performance.now() - started),
      close: stop,
    };
  } catch (error) {
    const tail = await readFile(join(dir, "kube-apiserver.log"), "utf8").catch(() => "");
    await stop();
    throw new Error(`${(error as Error).message}\n--- kube-apiserver.log (tail) ---\n${tail.slice(-3_000)}`);
  }
}

async function waitForReady(dir: string, child: ChildProcess, timeoutMs: number): Promise<ServerInfo> {
  const deadline = Date.now() + timeoutMs;
  let info: ServerInfo | undefined;
  let last = "no server.json yet";
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`kube-apiserver-go exited (${child.exitCode ?? child.signalCode}) while starting`);
    }
    info ??= await readFile(join(dir, "server.json"), "utf8").then(
      (text) => JSON.parse(text) as ServerInfo,
      () => undefined,
    );
    if (info) {
      const answer = await readyz(info);
      if (answer.status === 200) return info;
      last = `/readyz: ${answer.status} ${answer.body.trim().split("\n").slice(-3).join(" | ")}`;
    }
    // Polling a process that gives no other signal; 100 ms is small next to a start of seconds.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`kube-apiserver not ready after ${timeoutMs} ms (${last})`);
}

async function readyz(info: ServerInfo): Promise<{ status: number; body: string }> {
  const [ca, cert, key] = await Promise.all(
    [info.caFile, info.adminCertFile, info.adminKeyFile].map((f) => readFile(f)),
  );
  return new Promise((resolve) => {
    const req = request(`${info.server}/readyz?verbose`, { ca, cert, key, timeout: 5_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", (error) => resolve({ status: 0, body: error.message }));
    req.end();
  });
}

function adminKubeConfig(info: ServerInfo): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "real", server: info.server, caFile: info.caFile }],
    users: [{ name: "admin", certFile: info.adminCertFile, keyFile: info.adminKeyFile }],
    contexts: [{ name: "admin", cluster: "real", user: "admin" }],
    currentContext: "admin",
  });
  return kc;
}
