// The election systems the bench runs side by side, and the timings they run with.
import type { PeerKind } from "./candidates.ts";

export type SystemId =
  | "pglease"
  | "pglease-no-notify"
  | "pglease-session-takeover"
  | "pglease-health-gate"
  | "pglease-two-clusters"
  | "client-go"
  | "client-go-release"
  | "client-go-same-identity"
  | "advisory-lock";

export interface SystemSpec {
  id: SystemId;
  label: string;
  kind: PeerKind;
  /** pglease: LISTEN for release notices. */
  notify: boolean;
  /** client-go: ReleaseOnCancel, the opt-in graceful release. */
  releaseOnCancel: boolean;
  /** pglease: --session-takeover, a follower claims once the holder's LISTEN session is gone. */
  sessionTakeover?: true;
  /** client-go: the pod's name as identity, kept by a restarted process (else a new uuid per process). */
  podIdentity?: true;
  /** pglease: --health-gate pod, grace and settle one retry interval. */
  healthGate?: true;
  /** pglease: the candidates spread over this many clusters, each with its own API server and --cluster-name. */
  clusters?: number;
}

export const SYSTEMS: Record<SystemId, SystemSpec> = {
  pglease: { id: "pglease", label: "pglease", kind: "pglease", notify: true, releaseOnCancel: false },
  "pglease-no-notify": {
    id: "pglease-no-notify",
    label: "pglease --no-notify",
    kind: "pglease",
    notify: false,
    releaseOnCancel: false,
  },
  "pglease-session-takeover": {
    id: "pglease-session-takeover",
    label: "pglease --session-takeover",
    kind: "pglease",
    notify: true,
    releaseOnCancel: false,
    sessionTakeover: true,
  },
  "pglease-health-gate": {
    id: "pglease-health-gate",
    label: "pglease --health-gate pod",
    kind: "pglease",
    notify: true,
    releaseOnCancel: false,
    healthGate: true,
  },
  "pglease-two-clusters": {
    id: "pglease-two-clusters",
    label: "pglease, candidates in two clusters",
    kind: "pglease",
    notify: true,
    releaseOnCancel: false,
    clusters: 2,
  },
  "client-go": {
    id: "client-go",
    // After a crash and in a quiet election its release setting plays no part; graceful series say "no release".
    label: "client-go Lease",
    kind: "client-go",
    notify: false,
    releaseOnCancel: false,
  },
  "client-go-release": {
    id: "client-go-release",
    label: "client-go Lease, release on cancel",
    kind: "client-go",
    notify: false,
    releaseOnCancel: true,
  },
  "client-go-same-identity": {
    id: "client-go-same-identity",
    label: "client-go Lease, identity kept across restarts",
    kind: "client-go",
    notify: false,
    releaseOnCancel: false,
    podIdentity: true,
  },
  "advisory-lock": {
    id: "advisory-lock",
    label: "advisory lock (pinned connection)",
    kind: "advisory-lock",
    notify: false,
    releaseOnCancel: false,
  },
};

/**
 * One timing for every system, where the system allows it: the lease duration, client-go's renew
 * deadline and the retry period (client-go's, pglease's follower retry, the advisory poll).
 * pglease renews at a third of the lease, its default; client-go's leader renews every retry period.
 */
export interface PeerTiming {
  name: string;
  leaseMs: number;
  renewDeadlineMs: number;
  retryMs: number;
}

/** client-go's defaults, which are also pglease's: the headline figures. */
export const CLIENT_GO_DEFAULTS: PeerTiming = {
  name: "client-go defaults (lease 15 s, renew deadline 10 s, retry 2 s)",
  leaseMs: 15_000,
  renewDeadlineMs: 10_000,
  retryMs: 2_000,
};

/** The defaults scaled down five times, to keep --quick quick. */
export const SHORT_TIMING: PeerTiming = {
  name: "short (lease 3 s, renew deadline 2 s, retry 400 ms)",
  leaseMs: 3_000,
  renewDeadlineMs: 2_000,
  retryMs: 400,
};

/** pglease's renew interval at this timing (its default: a third of the lease). */
export function pgleaseRenewMs(timing: PeerTiming): number {
  return Math.round(timing.leaseMs / 3);
}

/** The health gate's grace, in the bench: the shortest the flags allow, one follower retry interval. */
export function healthGraceMs(timing: PeerTiming): number {
  return timing.retryMs;
}

function healthGateArgs(timing: PeerTiming): string[] {
  const grace = `${healthGraceMs(timing)}ms`;
  return ["--health-gate", "pod", "--health-grace", grace, "--health-settle", grace];
}

export function argsFor(system: SystemSpec, timing: PeerTiming, lease: string, lockKey: number): string[] {
  switch (system.kind) {
    case "pglease":
      return [
        "run",
        "--lease",
        lease,
        "--http-addr",
        "127.0.0.1:0",
        "--duration",
        `${timing.leaseMs}ms`,
        "--retry-interval",
        `${timing.retryMs}ms`,
        "--log-level",
        "info",
        ...(system.notify ? [] : ["--no-notify"]),
        ...(system.sessionTakeover ? ["--session-takeover"] : []),
        ...(system.healthGate ? healthGateArgs(timing) : []),
      ];
    case "client-go":
      return [
        "--lease",
        lease,
        "--lease-duration",
        String(timing.leaseMs),
        "--renew-deadline",
        String(timing.renewDeadlineMs),
        "--retry-period",
        String(timing.retryMs),
        ...(system.releaseOnCancel ? ["--release-on-cancel"] : []),
      ];
    case "advisory-lock":
      return ["--key", String(lockKey), "--retry-period", String(timing.retryMs)];
  }
}
