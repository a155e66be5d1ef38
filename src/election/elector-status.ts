// An elector's status() from its state: answered from the clock, not only the state, since a loop
// that was blocked past the deadline may serve a request before its deadline timer runs.
import type { ElectionState, Outcome } from "./decide.ts";
import type { ElectorStatus } from "./elector-types.ts";

export interface StatusInput {
  key: string;
  holder: string;
  state: ElectionState;
  /** isLeader(): the term's deadline is still ahead on the elector's clock. */
  leading: boolean;
  now: number;
  lastOutcome: Outcome | null;
  since: Date;
  notCampaigning: string | null;
}

export function statusOf(input: StatusInput): ElectorStatus {
  const { observed } = input.state;
  const term = input.leading ? input.state.term : null;
  const role = term ? "leader" : "follower";
  return {
    key: input.key,
    holder: input.holder,
    role,
    fence: term?.fence ?? null,
    leader: role === "leader" ? input.holder : (observed?.holder ?? null),
    leaderFence: term?.fence ?? observed?.fence ?? null,
    expiresAt: term?.expiresAt ?? observed?.expiresAt ?? null,
    lastOutcome: input.lastOutcome,
    since: input.since,
    deadlineInMs: term ? Math.max(0, term.deadline - input.now) : null,
    notCampaigning: input.notCampaigning,
  };
}
