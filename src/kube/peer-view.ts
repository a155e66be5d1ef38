// The peers of this pod as a watch of the peer selector keeps them: the pods of the lease, their
// labels and fence annotations, current within a watch event's delay. A new leader reads its
// stale peers here instead of listing them at the moment of handover, and a leader sees at once
// a peer labelled leader again by an older term (reconcile.ts). Known only while the watch
// misses nothing; otherwise the caller lists.
import type { Pod } from "./client/api-types.ts";
import { type PodsWatchOptions, type PodWatch, watchPods } from "./pod-watch.ts";
import { isOlder } from "./publisher-state.ts";

export interface PeerView {
  /** The selector this view watches. */
  readonly selector: string;
  /** The other pods the selector picks, or null while the watch may have missed a change. */
  peers(): Pod[] | null;
  /** A peer as a request's answer showed it (a demotion patch): newer than the watch may be. */
  seen(pod: Pod): void;
  stop(): Promise<void>;
}

export interface PeerViewOptions extends Omit<PodsWatchOptions, "selector" | "onList" | "onPod" | "onGone"> {
  selector: string;
  podName: string;
  /** After each change the view takes in. */
  onChange: () => void;
}

export function startPeerView(opts: PeerViewOptions): PeerView {
  const { selector, podName, onChange, ...watchOptions } = opts;
  const pods = new Map<string, Pod>();
  const take = (pod: Pod) => {
    const name = pod.metadata?.name;
    if (!name || name === podName || isOlder(pod, pods.get(name))) return;
    pods.set(name, pod);
    onChange();
  };
  const watch: PodWatch = watchPods({
    ...watchOptions,
    selector: { labelSelector: selector },
    onList: (listed) => {
      pods.clear();
      for (const pod of listed) take(pod);
      onChange();
    },
    onPod: take,
    onGone: (pod) => {
      if (pod.metadata?.name) pods.delete(pod.metadata.name);
      onChange();
    },
  });
  return {
    selector,
    peers: () => (watch.healthy() ? [...pods.values()] : null),
    seen: take,
    stop: watch.stop,
  };
}
