// The sidecar's health gate wired to its input: the application containers' ready state from the
// pod the publisher already watches (--health-gate pod), or an HTTP probe (url). A healthy
// candidate is a peer pod from the publisher's peer list that campaigns for the same lease: its
// application containers ready (pod mode), or the pod Ready (url mode, where the peers' own URLs
// are not reachable from here).

import type { HealthConfig } from "../config/health-config.ts";
import {
  applicationReadiness,
  containersReady,
  isHealthyCandidate,
  type ReadinessRule,
} from "../kube/app-readiness.ts";
import type { Pod } from "../kube/client/api-types.ts";
import type { PodPublisher } from "../kube/publisher-contract.ts";
import { monotonicClock } from "../shared/clock.ts";
import type { Logger } from "../shared/logger.ts";
import { HealthGate } from "./health-gate.ts";
import { probeHealth } from "./health-probe.ts";

export interface AppHealth {
  gate: HealthGate;
  /** Feeds each version of this pod the publisher sees (pod mode). */
  onPod(pod: Pod): void;
  /** The publisher, once started: the peer list comes from it. */
  usePublisher(publisher: PodPublisher | null): void;
  stop(): void;
}

export function startAppHealth(
  config: HealthConfig,
  log: Logger,
  leadsAny: () => boolean,
  /** The pod annotation naming the lease a pod campaigns for, and this sidecar's published lease. */
  lease: { annotation: string; name: string },
): AppHealth | null {
  if (config.source === "off") return null;
  const rule: ReadinessRule = {
    appContainers: config.appContainers,
    sidecarContainer: config.sidecarContainer,
  };
  let publisher: PodPublisher | null = null;
  const gate = new HealthGate(config, {
    clock: monotonicClock,
    leadsAny,
    log: (message) => log.warn({ health: config.source }, message),
    healthyCandidate: async () => {
      if (!publisher)
        throw new Error("outside Kubernetes there is no peer list; --health-strict hands over without one");
      // A candidate campaigns for this lease: its sidecar published the lease annotation.
      const peers = (await publisher.listPeers()).filter(
        (pod) => pod.metadata?.annotations?.[lease.annotation] === lease.name,
      );
      const healthy = peers.find((pod) =>
        config.source === "pod" ? isHealthyCandidate(pod, rule) : containersReady(pod),
      );
      return healthy?.metadata?.name ?? null;
    },
  });
  let last = "";
  const report = (ready: boolean, detail: string) => {
    gate.report({ ready, detail });
    const line = `${ready}:${detail}`;
    if (line === last) return;
    last = line;
    log.info({ health: config.source, ready }, `application ${ready ? "ready" : "unready"}: ${detail}`);
  };
  const probe =
    config.source === "url" && config.url
      ? probeHealth(config.url, config.intervalMs, monotonicClock, (r) => report(r.ready, r.detail))
      : null;
  return {
    gate,
    onPod: (pod) => {
      if (config.source !== "pod") return;
      const r = applicationReadiness(pod, rule);
      report(r.ready, r.detail);
    },
    usePublisher: (p) => {
      publisher = p;
    },
    stop: () => {
      probe?.stop();
      gate.stop();
    },
  };
}
