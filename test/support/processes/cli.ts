// Runs the real `pglease` entry point as a child process, the way a user or a pod does.
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { freePort } from "../postgres/embedded-postgres.ts";

export const PGLEASE = fileURLToPath(new URL("../../../cmd/pglease.ts", import.meta.url));

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function baseEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  // A clean environment: no cluster, no stray database settings from the test runner.
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_NO_WARNINGS: "1" };
  return { ...env, ...extra };
}

export function runPglease(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = 30_000,
): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [PGLEASE, ...args], {
      env: baseEnv(env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`pglease ${args.join(" ")} did not finish in ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      // 'close' follows once the pipes drain.
      child.on("close", () => resolve({ code, signal, stdout, stderr }));
    });
  });
}

/**
 * Why `pglease run` stopped: its fatal line (JSON on stdout, like its other lines), the message
 * and each problem one per line; nothing may have gone to stderr.
 */
export function fatalText(out: Finished): string {
  if (out.stderr !== "") throw new Error(`pglease run wrote to stderr: ${out.stderr}`);
  const fatal = out.stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as { level?: string; msg?: string; problems?: string[] })
    .find((line) => line.level === "fatal");
  if (!fatal) throw new Error(`pglease run logged no fatal line:\n${out.stdout}`);
  return [fatal.msg, ...(fatal.problems ?? [])].join("\n");
}

export interface Running {
  child: ChildProcess;
  output(): string;
  /** Resolves with the first log line (parsed JSON) whose msg matches. */
  waitForLog(pattern: RegExp, timeoutMs?: number): Promise<Record<string, unknown>>;
  exited: Promise<Finished>;
  stop(signal?: NodeJS.Signals): Promise<Finished>;
}

export function startPglease(args: readonly string[], env: NodeJS.ProcessEnv = {}): Running {
  const child = spawn(process.execPath, [PGLEASE, ...args], {
    env: baseEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const waiters: Array<{ pattern: RegExp; resolve: (line: Record<string, unknown>) => void }> = [];
  const scan = () => {
    // The last piece may be a line still being written.
    for (const line of stdout.split("\n").slice(0, -1)) {
      if (!line.startsWith("{")) continue;
      const parsed = JSON.parse(line) as Record<string, unknown>;
      for (const waiter of [...waiters]) {
        if (waiter.pattern.test(String(parsed.msg))) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(parsed);
        }
      }
    }
  };
  child.stdout?.on("data", (d: Buffer) => {
    stdout += d.toString();
    scan();
  });
  child.stderr?.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<Finished>((resolve) => {
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return {
    child,
    output: () => stdout + stderr,
    waitForLog(pattern, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(new Error(`no log line matching ${pattern} in ${timeoutMs} ms:\n${stdout}\n${stderr}`)),
          timeoutMs,
        );
        waiters.push({
          pattern,
          resolve: (line) => {
            clearTimeout(timer);
            resolve(line);
          },
        });
        scan();
        exited.then(() =>
          reject(new Error(`pglease exited before logging ${pattern}:\n${stdout}\n${stderr}`)),
        );
      });
    },
    exited,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** `pglease run` for one lease on a free loopback port, followers looking every 200 ms. */
export async function startLeaseRun(
  lease: string,
  duration: string,
  env: NodeJS.ProcessEnv,
  extra: readonly string[] = [],
): Promise<{ run: Running; port: number }> {
  const port = await freePort();
  const args = ["run", "--lease", lease, "--http-addr", `127.0.0.1:${port}`, "--duration", duration];
  const run = startPglease([...args, "--retry-interval", "200ms", ...extra], env);
  return { run, port };
}

/** With a short lease, so tests move fast. */
export function startShortLeaseRun(lease: string, env: NodeJS.ProcessEnv, extra: readonly string[] = []) {
  return startLeaseRun(lease, "3s", env, extra);
}
