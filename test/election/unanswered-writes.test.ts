// The elector's record of writes the store has not answered, on an injected clock. A statement the
// store dropped before it reached the server (StatementNotSent: it waited too long for a pool
// connection) cannot commit: it must not make a stopping elector look for a stray term, nor be
// waited for as a claim that may have won.
import { expect, it } from "vitest";
import { withDeadline } from "../../src/election/bounded.ts";
import type { ClaimAnswer } from "../../src/election/ports.ts";
import { UnansweredWrites } from "../../src/election/unanswered-writes.ts";
import { StatementNotSent } from "../../src/postgres/store.ts";
import { ManualClock } from "../support/manual-clock.ts";

const call =
  (clock: ManualClock) =>
  <T>(operation: Promise<T>) =>
    withDeadline(clock, 2_500, operation);

it("forgets a claim the store never sent, and still waits for one that failed on the link", async () => {
  const clock = new ManualClock();
  const writes = new UnansweredWrites(clock, 2_500);
  const dropped = Promise.reject<ClaimAnswer>(new StatementNotSent(600, 500));
  await expect(writes.claim(dropped, call(clock))).rejects.toThrow(StatementNotSent);
  expect(writes.any).toBe(false);
  expect(writes.claimPending).toBe(false);

  const broken = Promise.reject<ClaimAnswer>(new Error("read ECONNRESET"));
  await expect(writes.claim(broken, call(clock))).rejects.toThrow("ECONNRESET");
  expect(writes.any).toBe(true);
  expect(writes.claimPending).toBe(true);
});
