// A quiet pod's cost on the API server, and drift repair without the periodic re-read: the watches
// (its own pod, its peers) resume from their last resourceVersion, so nothing is re-read while
// they stream.
import { afterEach, describe, expect, it } from "vitest";
import { PUBLISH_DEFAULTS } from "../../src/kube/publish-config.ts";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import { ManualClock } from "../support/manual-clock.ts";
import {
  follower,
  type Harness,
  leader,
  NAMESPACE,
  POD,
  role,
  startHarness,
  until,
} from "./publisher-harness.ts";

let h: Harness;
afterEach(async () => {
  await h?.close();
});

const HOUR_MS = 3_600_000;
/** The target: API requests per quiet pod-hour. */
const QUIET_HOUR_BUDGET = 6;

async function startedAsLeader(kube: Parameters<typeof startHarness>[0], clock: ManualClock): Promise<void> {
  h = await startHarness(kube, {
    clock,
    // The product's resync interval, the one a quiet pod runs with.
    config: { resyncIntervalMs: PUBLISH_DEFAULTS.resyncIntervalMs },
    // No request times out while the clock runs ahead of the server: each request is answered.
    timing: { requestTimeoutMs: 2 * HOUR_MS },
    // Watches asked for the shortest timeout, 30 minutes: the hour holds one renewal.
    random: () => 0,
  });
  await h.publisher.start(follower());
  h.publisher.setDesired(leader(7));
  await until("leader on the pod", () => h.publisher.state().published);
  await until("its LeaderElected event", async () => (await h.server.events(NAMESPACE)).length > 0);
  // Its own pod's and its peers'.
  await h.server.waitForWatches(2);
}

/** Moves the clock on a minute at a time, letting what each minute starts (a renewal) run. */
async function passQuietly(clock: ManualClock, ms: number): Promise<void> {
  for (let passed = 0; passed < ms; passed += 60_000) {
    clock.advance(60_000);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** The watches of its own pod (the peer view's have a label selector). */
const watches = () => h.server.requests.filter((r) => r.verb === "watch" && r.query.fieldSelector);

const reads = () => h.server.requests.filter((r) => r.verb === "get" || r.verb === "list");

await onEachKubeServer("publisher quiet-cost suite", (kube) => {
  describe("a quiet pod", () => {
    it(`makes at most ${QUIET_HOUR_BUDGET} API requests in an hour on its clock, and still repairs drift`, async () => {
      const clock = new ManualClock();
      await startedAsLeader(kube, clock);
      h.server.clearRequests();
      await passQuietly(clock, HOUR_MS);
      await until("both watches streaming", async () => {
        clock.advance(50);
        return h.server.openWatches === 2;
      });
      const quiet = h.server.requests.map((r) => `${r.verb} ${r.resource}`);
      expect(quiet.length, quiet.join(", ")).toBeLessThanOrEqual(QUIET_HOUR_BUDGET);
      expect(reads()).toEqual([]);

      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        delete pod.metadata?.labels?.["pglease.io/role"];
      });
      await until("the role label back", async () => role(await h.pod()) === "leader");
      expect(reads()).toEqual([]);
    });

    it("repairs a label removed while its watch was being renewed, resuming the watch without a re-read", async () => {
      const clock = new ManualClock();
      await startedAsLeader(kube, clock);
      h.server.clearRequests();
      // The server ends the watch (its timeout) and refuses the next one once: a gap with no watch.
      h.server.faults.failNext({
        match: (r) => r.watch && r.query.get("fieldSelector") !== null,
        status: 500,
      });
      expect(h.server.faults.dropWatches({ mode: "end" })).toBe(2);
      // The pauses between watches are on the publisher's clock.
      await until("the refused watch", () => {
        clock.advance(50);
        return watches().some((w) => w.status === 500);
      });
      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        delete pod.metadata?.labels?.["pglease.io/role"];
      });
      await until("the role label back", async () => {
        clock.advance(50);
        return role(await h.pod()) === "leader";
      });
      expect(watches().length).toBe(2);
      expect(watches().every((w) => /^\d+$/.test(w.query.resourceVersion ?? ""))).toBe(true);
      expect(reads()).toEqual([]);
    });
  });
});
