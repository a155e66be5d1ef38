// The checker's rule on health-gated leadership: the labelled leader's application is ready
// whenever another pod's is, once the gate has had its grace period and a bound to act. Judged
// from the API server's label changes and the application readiness the kubelet (the
// app-unready fault) wrote, over the whole recording.
import type { History } from "./history.ts";
import { LabelTimeline } from "./timeline.ts";
import type { Violation } from "./violation.ts";

/** Each pod's application readiness over time: every pod starts ready. */
class ReadinessTimeline {
  readonly #byPod = new Map<string, { time: number; ready: boolean }[]>();

  constructor(history: History) {
    for (const change of [...history.appReadiness].sort((a, b) => a.time - b.time)) {
      const list = this.#byPod.get(change.pod) ?? [];
      list.push(change);
      this.#byPod.set(change.pod, list);
    }
  }

  readyAt(pod: string, time: number): boolean {
    let ready = true;
    for (const change of this.#byPod.get(pod) ?? []) {
      if (change.time > time) break;
      ready = change.ready;
    }
    return ready;
  }

  times(): number[] {
    return [...this.#byPod.values()].flat().map((c) => c.time);
  }
}

/**
 * No pod stays labelled leader with its application unready for longer than `boundMs` while
 * another pod's application is ready: its sidecar should have handed over after the grace period.
 */
export function unreadyLeaders(history: History, boundMs: number): Violation[] {
  const labels = new LabelTimeline(history.labels);
  const readiness = new ReadinessTimeline(history);
  const pods = Object.values(history.pods);
  const points = [...new Set([...labels.times(), ...readiness.times(), history.end])].sort((a, b) => a - b);
  const out: Violation[] = [];
  for (const pod of pods) {
    const unreadyLeaderAt = (t: number) =>
      labels.roleAt(pod, t) === "leader" &&
      !readiness.readyAt(pod, t) &&
      pods.some((other) => other !== pod && readiness.readyAt(other, t));
    let since: number | null = null;
    for (const t of points) {
      const now = t < history.end && unreadyLeaderAt(t);
      if (now && since === null) since = t;
      if (now || since === null) continue;
      if (t - since > boundMs) {
        out.push({
          rule: "unready-leader",
          at: since,
          detail: `${pod} stayed labelled leader with its application unready for ${t - since} ms while another pod's application was ready (bound ${boundMs} ms)${t === history.end ? ", until the recording ended" : ""}`,
        });
      }
      since = null;
    }
  }
  return out;
}
