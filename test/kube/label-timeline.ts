// What the late-label tests share: a peer leading a newer term, a PATCH held at the server, and an
// independent client's watch that sees every role-label write in the server's order, so a test
// knows exactly whether two pods were ever labelled leader at once, and for how long.
import { performance } from "node:perf_hooks";
import { type V1Pod, Watch } from "@kubernetes/client-node";
import type { LeadershipState } from "../../src/kube/desired-state.ts";
import type { TestKube } from "../support/kube/kube-servers.ts";
import { NAMESPACE, role } from "./publisher-harness.ts";

/** The other pod of the lease in these tests. */
export const PEER = "orders-1";

/** What the peer's publisher is told when it leads term `fence`. */
export function peerLeader(fence: number): LeadershipState {
  return { lease: "orders-sync", role: "leader", fence, holder: `${PEER}-c3d4` };
}

export interface LabelTimeline {
  /** Each stretch during which two or more pods carried the leader label, in ms as the watch saw it. */
  overlaps: number[];
  /** True while two or more pods carry it. */
  overlapping(): boolean;
  seen(name: string): boolean;
  close(): void;
}

/** The role label of every pod of the namespace, write by write in the server's order (one watch). */
export async function labelTimeline(server: TestKube): Promise<LabelTimeline> {
  const roles = new Map<string, string | undefined>();
  const overlaps: number[] = [];
  let since: number | null = null;
  const leaders = () => [...roles.values()].filter((r) => r === "leader").length;
  const watch = new Watch(server.kubeConfig({ namespace: NAMESPACE }));
  const controller = await watch.watch(
    `/api/v1/namespaces/${NAMESPACE}/pods`,
    {},
    (type: string, pod: V1Pod) => {
      const name = pod.metadata?.name as string;
      roles.set(name, type === "DELETED" ? undefined : role(pod));
      if (leaders() > 1 && since === null) since = performance.now();
      if (leaders() <= 1 && since !== null) {
        overlaps.push(Math.round(performance.now() - since));
        since = null;
      }
    },
    () => {},
  );
  return {
    overlaps,
    overlapping: () => since !== null,
    seen: (name) => roles.has(name),
    close: () => controller.abort(),
  };
}

/** Holds the next PATCH of `pod` at the server (before it is applied), and only that one. */
export function holdNextPatch(server: TestKube, pod: string) {
  let armed = true;
  return server.faults.hang({
    match: (r) => {
      if (!armed || r.method !== "PATCH" || r.path !== `/api/v1/namespaces/${NAMESPACE}/pods/${pod}`)
        return false;
      armed = false;
      return true;
    },
  });
}
