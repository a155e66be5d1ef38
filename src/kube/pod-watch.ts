// Watches of pods: this process's own pod, so a label, annotation or condition changed by hand is
// seen at once and put back, and its peers (peer-view.ts). Each lists once, then watches from the
// list's resourceVersion; every event and bookmark moves that version on, so a watch that ends
// (server timeout, proxy, API server restart) resumes where it stopped and the server replays
// what changed meanwhile: no re-read. Only when the server no longer has that version (410
// Gone) is the pod listed again.

import type { Clock, Timer } from "../shared/clock.ts";
import { hideCredentials } from "../shared/hide-credentials.ts";
import type { Logger } from "../shared/logger.ts";
import { type BackoffTiming, backoffDelay, pause } from "./backoff.ts";
import type { Pod, PodList, WatchEvent } from "./client/api-types.ts";
import { KubeApiError, type KubeClient, parseJson } from "./client/connection.ts";

interface WatchTiming {
  client: KubeClient;
  namespace: string;
  logger: Logger;
  backoff: BackoffTiming;
  /** A watch whose answer has not started after this long is abandoned. */
  openTimeoutMs: number;
  random: () => number;
  clock: Clock;
}

export interface PodWatchOptions extends WatchTiming {
  /** Lists this pod (fieldSelector metadata.name), for the version to watch from. */
  list: () => Promise<PodList>;
  podName: string;
  /** A pod of this name; a pod recreated under it has another uid (the caller tells them apart). */
  onPod: (pod: Pod) => void;
  /** The pod deleted (the object the server last had), or none left of this name at a relist. */
  onDeleted: (pod: Pod | undefined) => void;
}

export interface PodsWatchOptions extends WatchTiming {
  /** The watch's selector query (`fieldSelector` or `labelSelector`), the list's too. */
  selector: Record<string, string>;
  /** Lists the watched pods with the same selector, for the version to watch from. */
  list: () => Promise<PodList>;
  /** Every pod the server has now (at start and after a 410); `first` for the first list. */
  onList: (pods: Pod[], first: boolean) => void;
  onPod: (pod: Pod) => void;
  /** A pod deleted, or no longer matching the selector. */
  onGone: (pod: Pod) => void;
}

export interface PodWatch {
  /** No change to the pod can be missed: a watch streams, or resumes from the last version seen. */
  healthy(): boolean;
  /** Ends the watch; resolves once nothing of it is left running or scheduled. */
  stop(): Promise<void>;
}

// kube-apiserver keeps a watch as long as timeoutSeconds asks, without a cap; when none is given
// it picks --min-request-timeout (1800 s by default) times 1–2. Ask for that same 30–60 minutes:
// each renewal resumes from the last version, one request, no read.
const MIN_WATCH_SECONDS = 1800;

type WatchEnd = "ended" | "gone";

export function watchOwnPod(opts: PodWatchOptions): PodWatch {
  const { list, podName, onPod, onDeleted, ...timing } = opts;
  return watchPods({
    ...timing,
    selector: { fieldSelector: `metadata.name=${podName}` },
    list,
    onList: (pods, first) => {
      const pod = pods[0];
      if (pod) onPod(pod);
      else if (!first) onDeleted(undefined);
    },
    onPod,
    onGone: onDeleted,
  });
}

export function watchPods(opts: PodsWatchOptions): PodWatch {
  const stopping = new AbortController();
  const path = `/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/pods`;
  let resourceVersion: string | undefined;
  // Watch attempts that failed in a row. While there are none and a version is known, no change
  // can be missed: a watch streams, or the next one resumes where the last ended and is replayed.
  let failures = 0;
  // A watch's answer has begun: it sees every change from its version on, whatever failed before.
  let streaming = false;

  async function relist(first: boolean): Promise<void> {
    const list = await opts.list();
    opts.onList(list.items, first);
    resourceVersion = list.metadata?.resourceVersion;
  }

  /** Takes in one event; "gone" when the server no longer has the version watched from. */
  function apply(event: WatchEvent): WatchEnd | undefined {
    if (event.type === "ERROR") {
      if (event.object.code === 410) return "gone";
      // The server's text may quote what it refused (an admission message, a selector): hidden, as
      // on every other API error path (connection.ts).
      throw new Error(
        `watch error: ${hideCredentials(event.object.message ?? JSON.stringify(event.object))}`,
      );
    }
    resourceVersion = event.object.metadata?.resourceVersion ?? resourceVersion;
    // A bookmark only moves the version on: a resumed watch then starts from a recent one.
    if (event.type === "DELETED") opts.onGone(event.object);
    else if (event.type !== "BOOKMARK") opts.onPod(event.object);
    return undefined;
  }

  /** One watch from resourceVersion until it ends; resolves "gone" when that version expired. */
  async function watchOnce(): Promise<WatchEnd> {
    const connection = new AbortController();
    const signal = AbortSignal.any([connection.signal, stopping.signal]);
    const timeoutSeconds = Math.floor(MIN_WATCH_SECONDS * (1 + opts.random()));
    let idle: Timer = opts.clock.setTimer(opts.openTimeoutMs, () =>
      connection.abort(new Error(`no answer to the watch within ${opts.openTimeoutMs} ms`)),
    );
    // A peer that vanished is found by TCP keep-alive (connection.ts); this catches a stream that
    // outlives the timeout it asked for, a proxy holding it open after the server let go. That is
    // an end like the server's own: the next watch resumes from the version reached.
    let outlived = false;
    const armIdle = () => {
      idle.cancel();
      idle = opts.clock.setTimer((timeoutSeconds + 60) * 1000, () => {
        outlived = true;
        connection.abort();
      });
    };
    try {
      const response = await opts.client.stream({
        method: "GET",
        path,
        query: {
          watch: "true",
          ...opts.selector,
          allowWatchBookmarks: "true",
          timeoutSeconds: String(timeoutSeconds),
          ...(resourceVersion ? { resourceVersion } : {}),
        },
        signal,
      });
      armIdle();
      streaming = true;
      // Decoded by the stream: a character split across two chunks stays whole.
      response.setEncoding("utf8");
      let buffered = "";
      for await (const chunk of response) {
        armIdle();
        buffered += chunk as string;
        const lines = buffered.split("\n");
        buffered = lines.pop() ?? "";
        for (const line of lines) {
          if (
            line.trim() !== "" &&
            apply(parseJson<WatchEvent>(line, "the watch sent a line that is not JSON")) === "gone"
          )
            return "gone";
        }
      }
      return "ended";
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 410) return "gone";
      if (outlived && !stopping.signal.aborted) return "ended";
      throw signal.aborted ? signal.reason : error;
    } finally {
      streaming = false;
      idle.cancel();
      connection.abort();
    }
  }

  async function run(): Promise<void> {
    let first = true;
    while (!stopping.signal.aborted) {
      try {
        if (resourceVersion === undefined) await relist(first);
        first = false;
        const end = await watchOnce();
        if (end === "gone") resourceVersion = undefined;
        failures = 0;
      } catch (error) {
        if (stopping.signal.aborted) return;
        failures++;
        opts.logger.debug(
          { err: error instanceof Error ? error.message : error },
          "pod watch failed; retrying",
        );
      }
      await pause(opts.clock, backoffDelay(failures, opts.backoff, opts.random), stopping.signal);
    }
  }

  const running = run();
  return {
    healthy: () => resourceVersion !== undefined && (failures === 0 || streaming),
    stop: () => {
      stopping.abort();
      return running;
    },
  };
}
