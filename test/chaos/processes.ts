// Every child process the chaos run starts, so that nothing outlives it: not on success, not on
// an error, not on Ctrl-C (a stopped child ignores SIGINT until continued), not on process exit.
import type { ChildProcess } from "node:child_process";

const live = new Set<ChildProcess>();

function running(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

export function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once("exit", () => live.delete(child));
  return child;
}

/** Sends a signal if the process still runs; answers whether it did. */
export function signal(child: ChildProcess, name: NodeJS.Signals): boolean {
  if (!running(child)) return false;
  return child.kill(name);
}

/** Resolves once the process has exited (at once if it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (!running(child)) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

/** SIGTERM, then SIGKILL after `graceMs`; a stopped process is continued first so it can hear it. */
export async function terminate(child: ChildProcess, graceMs: number): Promise<void> {
  if (!running(child)) return;
  const gone = exited(child);
  signal(child, "SIGCONT");
  signal(child, "SIGTERM");
  const timer = setTimeout(() => signal(child, "SIGKILL"), graceMs);
  await gone;
  clearTimeout(timer);
}

/** Synchronous last resort, safe inside an 'exit' handler. */
export function killAllNow(): void {
  for (const child of live) signal(child, "SIGKILL");
}

process.on("exit", killAllNow);
