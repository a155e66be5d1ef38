// The two things the elector talks to, as small interfaces: the lease store (PostgreSQL
// in production, src/postgres) and the release feed (LISTEN/NOTIFY). The elector itself
// never imports a database or Kubernetes client; the composition root (src/leases/open-leases.ts) wires the real ones in.

/** A claim either wins the lease or tells who holds it, in the same round trip. */
export type ClaimAnswer =
  | {
      won: true;
      fence: number;
      acquiredAt: Date;
      expiresAt: Date;
      /** expires_at minus the server's clock_timestamp() of that statement, in ms. */
      ttlMs: number;
      /** How the lease changed hands, in the history table's words, when the store knows. */
      change?: { reason: string; previousHolder: string | null };
    }
  | {
      won: false;
      /** null only in the rare race where the row appeared after the statement's snapshot. */
      holder: string | null;
      fence: number | null;
      expiresAt: Date | null;
      ttlMs: number | null;
    };

export type RenewAnswer = { renewed: true; expiresAt: Date; ttlMs: number } | { renewed: false };

export interface LeaseView {
  key: string;
  holder: string;
  fence: number;
  acquiredAt: Date;
  expiresAt: Date;
  /** Time left by the server's clock when it was read; zero or less means expired. */
  ttlMs: number;
  /**
   * The holder recorded its server session (session takeover) and that session is gone: the lease
   * may be claimed before its expiry.
   */
  sessionGone?: boolean;
}

export interface LeaseStore {
  /** Wins only a free or expired lease, or this holder's own: never another holder's live one. */
  claim(key: string, holder: string, durationMs: number): Promise<ClaimAnswer>;
  renew(key: string, holder: string, fence: number, durationMs: number): Promise<RenewAnswer>;
  /** True when this holder's term (key, holder, fence) was live and is now ended. */
  release(key: string, holder: string, fence: number): Promise<boolean>;
  read(key: string): Promise<LeaseView | null>;
}

/**
 * A store that also ends many terms of one holder in one statement, each row checked against its
 * own key, holder and fence as release() checks one: answers the fence released per key (a term
 * already over is left out). stopElectors() stops many electors through it at once.
 */
export interface ReleasesMany {
  releaseMany(
    holder: string,
    terms: ReadonlyArray<{ key: string; fence: number }>,
  ): Promise<ReadonlyMap<string, number>>;
}

/**
 * Announcements of released leases, so followers claim at once instead of at their next look.
 * A notice is a hint, never proof: anyone who can connect can send one. The claim it leads to is
 * conditional on the server (LeaseStore.claim never takes another holder's live lease), so a
 * forged notice costs one claim that fails, never leadership.
 */
export interface ReleaseFeed {
  subscribe(listener: (key: string) => void): () => void;
  /** Optional: called after the feed reconnected, since notices may have been missed meanwhile. */
  subscribeReconnects?(listener: () => void): () => void;
  /**
   * Optional: true while notices are known to arrive (connected, and its last check answered in
   * time). Followers then wait for a notice or the observed expiry; without it they poll.
   */
  healthy?(): boolean;
  /** Optional: called when the feed stops being known healthy, so followers poll again at once. */
  subscribeUnhealthy?(listener: () => void): () => void;
  /**
   * Session takeover: called when the feed gives up the server session that claims record (a
   * ping timeout, a socket error, the server ending it), synchronously and before it closes the
   * connection, so a leader has stopped believing before that session can be seen gone.
   */
  subscribeSessionLost?(listener: () => void): () => void;
}
