/**
 * Who leads, as seen by code that runs OUTSIDE the elector's process (a reconciler next to the
 * pglease sidecar). Every source below lags the lease by a different amount, and none of them can
 * make a write safe on its own: a reading is a hint of whether to try, the fence guard on the
 * written resource is what rejects a stale writer.
 *
 * | Source                          | How fresh                                                        |
 * |---------------------------------|------------------------------------------------------------------|
 * | elector, in-process (library)   | immediate: the leader work's AbortSignal fires before the lease can pass on |
 * | sidecar `/status` (HTTP)        | immediate when asked, but only as fresh as the sidecar's last tick (renew interval) |
 * | downward API volume (files)     | kubelet sync: seconds to about a minute after the pod is patched  |
 * | environment variables           | never update after the container starts: do not use for leadership |
 */
export type LeadershipSource = "status-endpoint" | "downward-api";

export interface LeadershipReading {
  /** "leader" only when the source says exactly that; anything else (or nothing yet) reads as follower. */
  role: "leader" | "follower";
  /** The lease name, or null when the source does not say (downward API without the lease annotation). */
  lease: string | null;
  /** The fencing token of the current term, or null when the source carries none. */
  fence: number | null;
  source: LeadershipSource;
}

/** A leadership source that could not be read or did not make sense; `source` says which. */
export class LeadershipReadError extends Error {
  readonly source: LeadershipSource;

  constructor(source: LeadershipSource, message: string, options?: { cause?: unknown }) {
    super(`${source}: ${message}`, options);
    this.name = "LeadershipReadError";
    this.source = source;
  }
}

/**
 * Runs a fence parse (shared/fence-token.ts, through the pod contract for an annotation), turning its
 * RangeError into a LeadershipReadError that names the source.
 */
export function readFence(source: LeadershipSource, parse: () => number | null): number | null {
  try {
    return parse();
  } catch (error) {
    throw new LeadershipReadError(source, (error as Error).message, { cause: error });
  }
}
