// A worker thread of runParallel (batch.ts): runs its share of the seeds and posts the tally.
import { parentPort, workerData } from "node:worker_threads";
import { type BatchSpec, runBatch } from "./batch.ts";

if (!parentPort) throw new Error("test/sim/worker.ts runs as a worker thread of batch.ts");
parentPort.postMessage(await runBatch(workerData as BatchSpec));
