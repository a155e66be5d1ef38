// The database server's wall clock against the local monotonic clock. Every claim, renew and
// read answer carries the server's time implicitly (server now = expires_at − ttl, both from
// one statement), and the statement ran somewhere between the send and the receipt, so each
// answer bounds the offset between the two clocks. A step of the server's clock (NTP, an
// operator's `date`, a restore) shows as consecutive ranges that no round trip explains.
// A suspended process shows the same way: the monotonic clock stops, the server's does not.

/** server time − local monotonic time, in ms: the offset lies in [low, high]. */
export interface OffsetRange {
  low: number;
  high: number;
}

/** A step of the database server's clock, as the elector of one lease saw it. */
export interface ClockStepReport extends ClockStep {
  key: string;
  sentence: string;
}

export interface ClockStep {
  /** "forward": the server's clock gained on the local one, so leases ran out sooner than computed. */
  direction: "forward" | "backward";
  /** At least this many ms (the round trips' uncertainty already taken off). */
  sizeMs: number;
}

/** What one answer says about the offset: the server read `serverNow` between send and receipt. */
export function offsetRange(serverNow: number, sentAt: number, receivedAt: number): OffsetRange {
  return { low: serverNow - receivedAt, high: serverNow - sentAt };
}

/** The server time inside an answer, or null when the answer carries none. */
export function serverNow(answer: { expiresAt: Date | null; ttlMs: number | null }): number | null {
  if (answer.expiresAt === null || answer.ttlMs === null) return null;
  return answer.expiresAt.getTime() - answer.ttlMs;
}

/**
 * The step between two consecutive readings beyond `marginMs`, or null. Readings a renew interval
 * apart are compared, so the slow drift NTP allows (at most 0.5 ms per second) never adds up to one.
 */
export function clockStep(
  previous: OffsetRange | null,
  next: OffsetRange,
  marginMs: number,
): ClockStep | null {
  if (previous === null) return null;
  const gained = next.low - previous.high;
  if (gained > marginMs) return { direction: "forward", sizeMs: gained };
  const lost = previous.low - next.high;
  if (lost > marginMs) return { direction: "backward", sizeMs: lost };
  return null;
}

/** Follows one elector's answers; each step beyond the margin comes with its sentence. */
export class ServerClockWatch {
  #last: OffsetRange | null = null;
  readonly #key: string;
  readonly #marginMs: number;

  constructor(key: string, marginMs: number) {
    this.#key = key;
    this.#marginMs = marginMs;
  }

  observe(
    answer: { expiresAt: Date | null; ttlMs: number | null },
    sentAt: number,
    receivedAt: number,
  ): ClockStepReport | null {
    const now = serverNow(answer);
    if (now === null) return null;
    const range = offsetRange(now, sentAt, receivedAt);
    const step = clockStep(this.#last, range, this.#marginMs);
    this.#last = range;
    if (!step) return null;
    const size = `${(step.sizeMs / 1000).toFixed(1)}s`;
    const sentence =
      step.direction === "forward"
        ? `the database server's clock jumped forward by at least ${size} against this process's clock (lease ${this.#key}): leases ran out sooner than computed`
        : `the database server's clock jumped back by at least ${size} against this process's clock (lease ${this.#key}): leases last longer than computed`;
    return { key: this.#key, ...step, sentence };
  }
}
