// Which holders a peer's status reports dead (src/kube/crash-report.ts): only the message a run of
// the holder's own pod's sidecar container left, naming a holder with a restart proof, counts.
import { describe, expect, it } from "vitest";
import type { Pod } from "../../src/kube/client/api-types.ts";
import { holderPod, holdersReportedDead, terminationMessage } from "../../src/kube/crash-report.ts";

const PROOF = "#r:0123456789abcdef0123456789abcdef.42";
const HOLDER = `orders-0-1a2b3c4d${PROOF}`;

function pod(name: string, statuses: Array<{ name: string; message?: string; last?: boolean }>): Pod {
  return {
    metadata: { name, uid: `${name}-uid` },
    status: {
      initContainerStatuses: statuses.map((s) => {
        const terminated = { exitCode: 137, reason: "Error", ...(s.message ? { message: s.message } : {}) };
        return s.last
          ? {
              name: s.name,
              ready: false,
              state: { waiting: { reason: "CrashLoopBackOff" } },
              lastState: { terminated },
            }
          : { name: s.name, ready: false, state: { terminated } };
      }),
    },
  } as Pod;
}

describe("crash reports", () => {
  it("names the holder whose own run the kubelet reports terminated, now or as the last state", () => {
    const message = terminationMessage(HOLDER);
    expect(holdersReportedDead(pod("orders-0", [{ name: "pglease", message }]), null, "pglease")).toEqual([
      HOLDER,
    ]);
    expect(
      holdersReportedDead(pod("orders-0", [{ name: "pglease", message, last: true }]), null, "pglease"),
    ).toEqual([HOLDER]);
  });

  it("a report in another pod's status (forged by a peer), of another container, or of a message that is not the line whole, names nobody", () => {
    const message = terminationMessage(HOLDER);
    expect(holdersReportedDead(pod("orders-1", [{ name: "pglease", message }]), null, "pglease")).toEqual([]);
    expect(holdersReportedDead(pod("orders-0", [{ name: "app", message }]), null, "pglease")).toEqual([]);
    expect(
      holdersReportedDead(pod("orders-0", [{ name: "pglease", message: `x ${message}` }]), null, "pglease"),
    ).toEqual([]);
    expect(holdersReportedDead(pod("orders-0", [{ name: "pglease" }]), null, "pglease")).toEqual([]);
  });

  it("a plain sidecar container's status (sidecar.native=false) is read too", () => {
    const plain = {
      metadata: { name: "orders-0" },
      status: {
        containerStatuses: [
          {
            name: "pglease",
            ready: false,
            state: { waiting: { reason: "CrashLoopBackOff" } },
            lastState: { terminated: { exitCode: 137, message: terminationMessage(HOLDER) } },
          },
        ],
      },
    } as Pod;
    expect(holdersReportedDead(plain, null, "pglease")).toEqual([HOLDER]);
  });

  it("a holder without a restart proof or of another cluster has no pod here", () => {
    expect(holderPod("orders-0-1a2b3c4d", null)).toBeNull();
    expect(holderPod(HOLDER, null)).toBe("orders-0");
    expect(holderPod(`east/${HOLDER}`, "east")).toBe("orders-0");
    expect(holderPod(`east/${HOLDER}`, null)).toBeNull();
    expect(holderPod(HOLDER, "east")).toBeNull();
  });
});
