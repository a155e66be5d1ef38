// The fields of a transition's log line, in the history table's words: key, fence, heldBy (the
// history's holder: who holds after the change), previous_holder and reason. `holder` is this
// process on every line of the sidecar, these included. A change of hands made here (a claim won, a release)
// carries the history's reason; the other transitions name the elector's outcome, since the
// change of hands, if any, was made by someone else's statement.
import type { TickReport } from "../election/elector.ts";

export interface TransitionFields {
  key: string;
  /** The same as key, under the name the other lines of the sidecar use. */
  lease: string;
  fence: number | null;
  /** Who holds the lease after the change; null when a term ended. */
  heldBy: string | null;
  previous_holder: string | null;
  reason: string;
  outcome: TickReport["outcome"];
}

/** One per elector: remembers the fence of its own term, which a report of its end no longer holds. */
export function transitionFields(self: string): (tick: TickReport) => TransitionFields {
  let ownFence: number | null = null;
  let leaderSeen: string | null = null;
  return (tick) => {
    const base = { key: tick.key, lease: tick.key, outcome: tick.outcome };
    if (tick.outcome === "acquired" && tick.state.term) {
      ownFence = tick.state.term.fence;
      const previous = tick.change ? tick.change.previousHolder : leaderSeen;
      leaderSeen = self;
      return {
        ...base,
        fence: ownFence,
        heldBy: self,
        previous_holder: previous,
        reason: tick.change?.reason ?? "acquired",
      };
    }
    if (tick.outcome === "refused") {
      return { ...base, fence: tick.release ?? null, heldBy: null, previous_holder: self, reason: "refused" };
    }
    if (tick.state.role === "follower" && leaderSeen === self) {
      // This process's term ended: by its own release, or found lost, or given up locally.
      leaderSeen = tick.state.observed?.holder ?? null;
      const reason = tick.outcome === "released" ? "release" : tick.outcome;
      return { ...base, fence: ownFence, heldBy: leaderSeen, previous_holder: self, reason };
    }
    const observed = tick.state.observed;
    const previous = leaderSeen;
    if (observed?.holder) leaderSeen = observed.holder;
    return {
      ...base,
      fence: tick.state.term?.fence ?? observed?.fence ?? null,
      heldBy: tick.state.role === "leader" ? self : (observed?.holder ?? null),
      previous_holder: previous,
      reason: tick.outcome,
    };
  };
}
