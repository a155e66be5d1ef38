// The set of holders reported dead (src/election/crash-witness.ts): only a holder with a restart
// proof is taken, each once, and every addition wakes the subscribers (the followers' claims).
import { describe, expect, it } from "vitest";
import { WitnessedCrashes } from "../../src/election/crash-witness.ts";

const proven = (n: number) => `orders-0-1a2b3c4d#r:${"0".repeat(32)}.${n}`;

describe("witnessed crashes", () => {
  it("takes a holder with a restart proof once, and tells the subscribers each time it grows", () => {
    const witness = new WitnessedCrashes();
    let told = 0;
    witness.subscribe(() => told++);
    expect(witness.add(proven(1))).toBe(true);
    expect(witness.add(proven(1))).toBe(false);
    expect(witness.add(proven(2))).toBe(true);
    expect(witness.dead()).toEqual([proven(1), proven(2)]);
    expect(told).toBe(2);
  });

  it("refuses a holder without a proof: a name chosen by hand may be the next process's too", () => {
    const witness = new WitnessedCrashes();
    expect(witness.add("orders-0")).toBe(false);
    expect(witness.dead()).toEqual([]);
  });

  it("keeps the newest 32, so every claim still carries the set in one packet", () => {
    const witness = new WitnessedCrashes();
    for (let i = 1; i <= 40; i++) witness.add(proven(i));
    expect(witness.dead()).toHaveLength(32);
    expect(witness.dead()[0]).toBe(proven(9));
  });

  // Review: with more reports in the peers' statuses than the set keeps, every peer event re-added
  // the evicted ones, each a log line and a wake-up of every elector for a claim.
  it("does not take back a holder it let go: the peers' statuses keep showing old reports", () => {
    const witness = new WitnessedCrashes();
    let told = 0;
    witness.subscribe(() => told++);
    for (let i = 1; i <= 40; i++) witness.add(proven(i));
    expect(witness.add(proven(1))).toBe(false);
    expect(told).toBe(40);
    expect(witness.dead()[0]).toBe(proven(9));
  });
});
