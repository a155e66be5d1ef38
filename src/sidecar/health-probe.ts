// The application's health from an HTTP endpoint the sidecar probes (--health-gate url): for a
// process outside Kubernetes, or a finer signal than the kubelet's readiness. 2xx is healthy; an
// error, a timeout or any other status is not. The URL may carry a token: only its origin and
// path ever reach a log line or the status.

import type { Readiness } from "../kube/app-readiness.ts";
import type { Clock, Timer } from "../shared/clock.ts";

export interface HealthProbe {
  stop(): void;
}

export function probeHealth(
  url: URL,
  intervalMs: number,
  clock: Clock,
  report: (r: Readiness) => void,
): HealthProbe {
  const shown = `${url.origin}${url.pathname}`;
  let timer: Timer | null = null;
  let stopped = false;
  const once = async () => {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(intervalMs), redirect: "manual" });
      await res.body?.cancel();
      report({ ready: res.ok, detail: `GET ${shown} answered ${res.status}` });
    } catch (error) {
      const why =
        error instanceof Error && error.name === "TimeoutError"
          ? `no answer within ${intervalMs} ms`
          : "failed";
      report({ ready: false, detail: `GET ${shown} ${why}` });
    }
    if (!stopped) timer = clock.setTimer(intervalMs, () => void once());
  };
  void once();
  return {
    stop: () => {
      stopped = true;
      timer?.cancel();
    },
  };
}
