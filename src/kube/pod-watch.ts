// A watch on this process's own pod, so a label, annotation or condition changed by hand is
// seen at once and put back. Watches end (server timeouts, proxies, API server restarts):
// each end is followed by a fresh watch after a backoff, and by a resync, because changes
// made while no watch was open are not replayed.
import { type KubeConfig, type V1Pod, Watch } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Clock } from "../election/clock.ts";
import { type BackoffTiming, backoffDelay, pause } from "./backoff.ts";

export interface PodWatchOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  podName: string;
  logger: Logger;
  backoff: BackoffTiming;
  random: () => number;
  clock: Clock;
  onPod: (pod: V1Pod) => void;
  onDeleted: () => void;
  /** Called each time a watch is (re)established after an end: the caller should re-read the pod. */
  onReconnect: () => void;
}

// Like client-go's reflector: ask the server to end each watch after 5–10 minutes, so a quiet
// pod costs a few requests an hour rather than one every 30 s.
const MIN_WATCH_SECONDS = 300;

/**
 * client-node ends a watch after 30 s without a byte (a TypeScript-private field, a plain
 * property at run time). A quiet pod sends nothing for minutes: wait as long as the server
 * was asked to keep the watch, plus a margin, before calling it dead.
 */
function patientWatch(kubeConfig: KubeConfig, timeoutSeconds: number): Watch {
  const watch = new Watch(kubeConfig);
  Object.assign(watch, { requestTimeoutMs: (timeoutSeconds + 60) * 1000 });
  return watch;
}

export function watchOwnPod(opts: PodWatchOptions): { stop(): void } {
  const stopping = new AbortController();
  const path = `/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/pods`;
  let current: AbortController | null = null;

  async function run(): Promise<void> {
    let failures = 0;
    let first = true;
    while (!stopping.signal.aborted) {
      let endWith: (err: unknown) => void = () => {};
      const ended = new Promise<unknown>((resolve) => (endWith = resolve));
      let sawEvent = false;
      const timeoutSeconds = Math.floor(MIN_WATCH_SECONDS * (1 + opts.random()));
      try {
        current = await patientWatch(opts.kubeConfig, timeoutSeconds).watch(
          path,
          { fieldSelector: `metadata.name=${opts.podName}`, allowWatchBookmarks: true, timeoutSeconds },
          (phase, object: V1Pod) => {
            sawEvent = true;
            if (phase === "ADDED" || phase === "MODIFIED") opts.onPod(object);
            else if (phase === "DELETED") opts.onDeleted();
          },
          (err) => endWith(err),
        );
      } catch (err) {
        endWith(err);
      }
      if (stopping.signal.aborted) current?.abort();
      else if (!first) opts.onReconnect();
      first = false;
      const err = await ended;
      if (stopping.signal.aborted) return;
      failures = sawEvent || !err ? 0 : failures + 1;
      opts.logger.debug(
        { err: err instanceof Error ? err.message : err },
        "pod watch ended; re-establishing",
      );
      await pause(opts.clock, backoffDelay(failures, opts.backoff, opts.random), stopping.signal);
    }
  }

  void run();
  return {
    stop() {
      stopping.abort();
      current?.abort();
    },
  };
}
