// The takeover group's tables (its targets are in bench/targets.ts).
import type { Table } from "../group.ts";
import { count, ms } from "../report.ts";
import type { Spread } from "./peers.ts";
import type { TakeoverFigures } from "./takeover.ts";

const pair = (s: Spread) => [ms(s.p50Ms), ms(s.p99Ms)];

function restartTable(figures: TakeoverFigures): Table {
  return {
    title: `SIGKILL, then the same pod's process started again in place, ${figures.timing.name}`,
    columns: [
      "system",
      "trials",
      "holds p50 ms",
      "holds p99 ms",
      "process start p50 ms",
      "process start p99 ms",
      "over start p50 ms",
      "over start p99 ms",
      "restarted process leads",
    ],
    rows: figures.restart.map((s) => [
      s.label,
      count(s.trials.length),
      ...pair(s.holds),
      ...pair(s.start),
      ...pair(s.overStart),
      `${s.restartedLed} / ${s.trials.length}`,
    ]),
    notes: [
      "3 candidate processes per election; the leader is SIGKILLed at a uniformly random moment of a lease/3 window after things settle and its pod's process is spawned again at once (the kubelet's restart back-off is not counted).",
      "holds: SIGKILL → a new term (pglease: acquired_at on PostgreSQL's clock; client-go: its acquired line; advisory lock: the take, on PostgreSQL's clock), whoever won it.",
      "process start: the restarted process's spawn → its start line (pglease: campaigning; client-go: started, before its first Lease request; advisory lock: started, connected). over start: holds − process start, per trial.",
      "client-go keeps no proof that a process died: with a new identity per process (its usual setup, e.g. hostname_uuid) the restarted process waits for its predecessor's Lease to expire; with the same identity it takes the Lease at its first request, as a renewal (tryAcquireOrRenew sees itself as holder): a second live process under that identity would do the same.",
      "The advisory lock's restarted process takes the lock once PostgreSQL has ended the dead session, at its first try after connecting.",
      "With n trials, p99 is the largest but at most one of them; the JSON has every trial.",
    ],
  };
}

function sessionTable(figures: TakeoverFigures): Table {
  return {
    title: `SIGKILL without restart, --session-takeover, ${figures.timing.name}`,
    columns: ["system", "trials", "holds p50 ms", "holds p99 ms", "over retry p50 ms", "over retry p99 ms"],
    rows: figures.crash.map((s) => [s.label, count(s.trials.length), ...pair(s.holds), ...pair(s.overRetry)]),
    notes: [
      `holds: SIGKILL → a follower's new term (acquired_at on PostgreSQL's clock); over retry: holds − the follower retry interval (${ms(figures.timing.retryMs)} ms). The followers find the dead session at their next read; client-go's and the advisory lock's crash rows are in the peers group's failover table.`,
    ],
  };
}

function healthTable(figures: TakeoverFigures): Table {
  return {
    title: `The application in the leader's pod turns unready, --health-gate pod, ${figures.timing.name}`,
    columns: [
      "system",
      "trials",
      "grace ms",
      "holds p50 ms",
      "holds p99 ms",
      "labelled p50 ms",
      "labelled p99 ms",
      "over grace p50 ms",
      "over grace p99 ms",
    ],
    rows: [
      ...figures.health.map((s) => [
        s.label,
        count(s.trials.length),
        ms(s.graceMs),
        ...pair(s.holds),
        ...pair(s.labelled),
        ...pair(s.overGrace),
      ]),
      ["client-go Lease", "-", "-", "never", "never", "never", "never", "-", "-"],
    ],
    notes: [
      "The test writes the leader pod's `app` container as not ready into the pod's status, as the kubelet does when a readiness probe fails; the other two pods' applications stay ready.",
      "holds: that write → a new term (acquired_at on PostgreSQL's clock); labelled: → the new leader's pod labelled leader (the API server's record of the patch). over grace: labelled − the grace period, what pglease adds to the wait the operator chose (the grace is one follower retry interval here, the shortest the flags allow).",
      "client-go's elector has no health input: its leader keeps the Lease while its application is unready, until its process dies.",
    ],
  };
}

export function takeoverTables(figures: TakeoverFigures): Table[] {
  return [restartTable(figures), sessionTable(figures), healthTable(figures)];
}
