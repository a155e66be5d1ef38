// Takes the restart lock for one scope from two cluster workers and from a worker thread, and
// prints what each got: a cluster primary binds a socket once and shares it with every worker
// that listens on the same address, unless the listen is exclusive.
import cluster from "node:cluster";
import { isMainThread, Worker } from "node:worker_threads";
import { takeRestartLock } from "../../../src/postgres/restart-lock.ts";

const scope = { podUid: "probe", podName: `probe-${process.ppid}`, database: "h:5432/d", table: "t" };

async function report(who: string): Promise<string> {
  const result = await takeRestartLock(scope);
  return "lock" in result ? `${who}: restart lock` : `${who}: no restart lock`;
}

if (!isMainThread) {
  const result = await takeRestartLock(scope);
  console.log(
    `worker thread: ${"lock" in result ? "restart lock" : `no restart lock (${result.unavailable})`}`,
  );
} else if (cluster.isPrimary) {
  let done = 0;
  const workers = [cluster.fork(), cluster.fork()];
  for (const worker of workers) {
    worker.on("message", (line: string) => {
      console.log(line);
      if (++done === workers.length) {
        for (const w of workers) w.kill();
        new Worker(new URL(import.meta.url));
      }
    });
  }
} else {
  // Both ask while both live: the second must be refused.
  const line = await report("cluster worker");
  process.send?.(line);
  setInterval(() => {}, 1_000);
}
