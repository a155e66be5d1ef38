// The recorder names each process by the identity the lease table knows it by: log lines before
// the lease stack opens carry the identity without its restart proof; transition lines name it
// `holder` too (who holds after the change is their `heldBy`). A process named by its first line
// made the checker report its own fences as never granted.
import { expect, it } from "vitest";
import { Recorder } from "./recorder.ts";

it("names a process by its last own identity: the one with the restart proof, never a transition's heldBy", () => {
  const recorder = new Recorder();
  recorder.sidecarStarted("chaos-1", 42, 1_000);
  const time = new Date(2_000).toISOString();
  const proof = `chaos-1-b50ca926#r:${"a".repeat(32)}.7`;
  recorder.sidecarLine(42, { time, holder: "chaos-1-b50ca926", msg: "cannot reach PostgreSQL yet" });
  recorder.sidecarLine(42, { time, holder: proof, msg: "campaigning for chaos as …" });
  recorder.sidecarLine(42, {
    time,
    holder: proof,
    heldBy: "chaos-2-00000000",
    previous_holder: proof,
    outcome: "held-by-other",
    msg: "lease chaos is held by chaos-2-00000000",
  });
  // A line that still carries the identity without its proof does not take it back.
  recorder.sidecarLine(42, { time, holder: "chaos-1-b50ca926", msg: "release notices interrupted" });
  expect(recorder.incarnations[0]?.holder).toBe(proof);
});

// CI once cut the standby's link while a slow replica was still starting: it inspected a primary
// with no standby and warned of nothing. The first fault now waits for every replica to campaign.
it("counts a replica as started once its latest process says it campaigns, and not after that process ends", () => {
  const recorder = new Recorder();
  const time = new Date(2_000).toISOString();
  recorder.sidecarStarted("chaos-0", 7, 1_000);
  recorder.sidecarLine(7, { time, level: "warn", msg: "1 standby(s) replicate asynchronously: …" });
  expect(recorder.campaigning("chaos-0")).toBe(false);
  recorder.sidecarLine(7, { time, msg: "campaigning for chaos as chaos-0-1" });
  expect(recorder.campaigning("chaos-0")).toBe(true);
  expect(recorder.campaigning("chaos-1")).toBe(false);
  recorder.sidecarEnded(7, 3_000);
  recorder.sidecarStarted("chaos-0", 8, 3_100);
  expect(recorder.campaigning("chaos-0")).toBe(false);
});
