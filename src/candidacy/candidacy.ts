// This process as a candidate of each key it campaigns for: its row in the candidates table
// (written after the campaign's first tick, refreshed once per lease duration for all keys in one statement,
// removed at close), and its answer to a handover request (the campaign gate closed for the
// reservation, so the elector hands over as it would stop). A graceful stop's releases pick the
// successor among these rows themselves (src/postgres/statement-parts.ts, SUCCESSOR).

import { type CampaignGate, CampaignSwitch } from "../election/campaign-gate.ts";
import type { Elector } from "../election/elector.ts";
import type { CandidateEntry, CandidateStore, Standing } from "../postgres/candidates.ts";
import type { HandoverStore } from "../postgres/handover.ts";
import { allGates } from "./gates.ts";
import { DEFAULT_RESERVATION_MS } from "./plan.ts";
import { PriorityGate } from "./priority-gate.ts";

export interface CandidacyOptions {
  candidates: CandidateStore;
  handovers: HandoverStore;
  holder: string;
  pod: string;
  /** The pod's revision label, or null outside a controller that sets one. */
  revision: string | null;
  /** Handover requests for any key of the table (the release feed's second channel). */
  subscribeHandovers?: (listener: (key: string) => void) => () => void;
  /** Each statement's deadline: a candidacy stays live through one missed refresh plus one of it. */
  statementTimeoutMs: number;
  /**
   * Each answer to an announcement until the first that settles it: "recorded" (the rows are
   * stored), "refused" (the role lacks privileges: trying again will not help) or "failed"
   * (transient; tried again after a retry interval until it settles). The sidecar's readiness waits for it.
   */
  onAnnounced?: (answer: AnnounceAnswer) => void;
  warn(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
}

export interface CandidateOptions {
  /** Higher leads first when the lease is free (default 0): see PriorityGate. */
  priority?: number;
  /** Ask a live leader of lower priority to hand over to this process (default false). */
  preempt?: boolean;
  /** Campaign as a candidate that never claims (default false). */
  noLead?: boolean;
}

export type AnnounceAnswer = "recorded" | "refused" | "failed";

/** The reason no-lead mode gives, in the log line and in status().notCampaigning. */
export const NO_LEAD = "no-lead mode";

interface Joined {
  entry: CandidateEntry;
  durationMs: number;
  retryMs: number;
  preempt: boolean;
  handover: CampaignSwitch;
  priority: PriorityGate;
  elector: Elector | null;
  reopen: NodeJS.Timeout | null;
}

export class Candidacy {
  readonly #o: CandidacyOptions;
  readonly #keys = new Map<string, Joined>();
  #refresh: NodeJS.Timeout | null = null;
  #announcing: Promise<void> | null = null;
  #announceAfterTick = false;
  /** An announcement was answered for good (stored, or refused for lack of privileges). */
  #settled = false;
  #unsubscribe: (() => void) | null = null;
  #closed = false;

  constructor(options: CandidacyOptions) {
    this.#o = options;
    this.#unsubscribe = options.subscribeHandovers?.((key) => this.#handoverAsked(key)) ?? null;
  }

  /** Registers `key`; the gate it answers goes to the key's elector (with the application's own). */
  join(
    key: string,
    timing: { leaseDurationMs: number; retryIntervalMs: number },
    options: CandidateOptions,
    own?: CampaignGate,
  ): CampaignGate {
    const { priority = 0, noLead = false, preempt = false } = options;
    if (!Number.isSafeInteger(priority)) {
      throw new RangeError(`priority of lease ${key} must be a whole number, got ${priority}`);
    }
    if (preempt && noLead) {
      throw new RangeError(
        `lease ${key}: preempt and noLead contradict each other (a process that never leads cannot preempt)`,
      );
    }
    const entry = { key, pod: this.#o.pod, priority, revision: this.#o.revision, leads: !noLead };
    const handover = new CampaignSwitch();
    const byPriority = new PriorityGate(priority, timing.retryIntervalMs);
    this.#keys.set(key, {
      entry,
      durationMs: timing.leaseDurationMs,
      retryMs: timing.retryIntervalMs,
      preempt,
      handover,
      priority: byPriority,
      elector: null,
      reopen: null,
    });
    // No-lead first: the reason that never changes is the one worth a log line.
    const gates = [
      ...(noLead ? [new CampaignSwitch(NO_LEAD)] : []),
      ...(own ? [own] : []),
      handover,
      byPriority,
    ];
    return allGates(gates);
  }

  attach(key: string, elector: Elector): void {
    const joined = this.#keys.get(key);
    if (!joined) return;
    joined.elector = elector;
    joined.priority.attach(elector);
    // After the elector's first tick, not beside it: a restarted process's first claim then has the
    // pool's open connection to itself instead of waiting for a new one, and nothing waits on the
    // announcement. Keys attached meanwhile go out in that same statement.
    if (!this.#announceAfterTick) {
      this.#announceAfterTick = true;
      elector.once("tick", () => {
        this.#announceAfterTick = false;
        this.#announceSoon();
      });
    }
    // Once another holder leads, the handover is done: campaign again at once, not at the
    // reservation's end (a leader stopping meanwhile would otherwise have nobody to hand over to).
    elector.on("leader-changed", (seen) => {
      if (seen.holder !== null && seen.holder !== this.#o.holder && joined.reopen) this.#reopen(joined);
    });
  }

  /** One statement for every key joined in this turn of the event loop, then one per lease duration. */
  #announceSoon(): void {
    if (this.#announcing) return;
    this.#announcing = Promise.resolve().then(() => this.#announce());
  }

  async #announce(): Promise<void> {
    this.#announcing = null;
    if (this.#closed || this.#keys.size === 0) return;
    const every = Math.min(...[...this.#keys.values()].map((k) => k.durationMs));
    if (this.#refresh) clearTimeout(this.#refresh);
    this.#refresh = setTimeout(() => this.#announceSoon(), every);
    this.#refresh.unref();
    // Live through one missed refresh: a database blip does not make every candidate vanish.
    const liveForMs = 2 * every + this.#o.statementTimeoutMs;
    const entries = [...this.#keys.values()].map((k) => k.entry);
    const standings = await this.#o.candidates
      .announce(this.#o.holder, entries, liveForMs)
      .catch((error: Error) => {
        // Leadership does not depend on it: without the row this process is only no handover's target.
        const denied = (error as { code?: string }).code === "42501";
        // Until the first row is stored, a transient failure is tried again after a retry interval:
        // until then this pod is no stopping leader's successor, and a sidecar is not ready.
        const soon = !denied && !this.#settled;
        this.#o.warn(
          denied
            ? `could not record this process as a candidate: its role lacks privileges on the candidates table; as the table's owner: GRANT SELECT, INSERT, UPDATE, DELETE ON ${this.#o.candidates.table} TO <the lease role>`
            : `could not record this process as a candidate; trying again ${soon ? "shortly" : "at the next refresh"}`,
          { err: error.message },
        );
        if (soon && this.#refresh) {
          clearTimeout(this.#refresh);
          this.#refresh = setTimeout(
            () => this.#announceSoon(),
            Math.min(...[...this.#keys.values()].map((k) => k.retryMs)),
          );
          this.#refresh.unref();
        }
        this.#answered(denied ? "refused" : "failed");
        return null;
      });
    if (standings) this.#answered("recorded");
    for (const [key, standing] of standings ?? []) {
      const joined = this.#keys.get(key);
      joined?.priority.othersBest(standing.othersBest);
      if (joined?.preempt) await this.#preempt(joined, standing);
    }
  }

  #answered(answer: AnnounceAnswer): void {
    if (this.#settled || this.#closed) return;
    this.#settled = answer !== "failed";
    this.#o.onAnnounced?.(answer);
  }

  /** A live leader of lower priority is asked to hand over to this process, as an operator would. */
  async #preempt(joined: Joined, standing: Standing): Promise<void> {
    const leader = standing.leader;
    const status = joined.elector?.status();
    // Only a follower that would claim now: not one whose own gate (health, a drain) is closed.
    if (!leader || !status || leader.holder === this.#o.holder || status.role === "leader") return;
    if (status.notCampaigning !== null) return;
    if (leader.priority === null || leader.priority >= joined.entry.priority) return;
    const key = joined.entry.key;
    try {
      const asked = await this.#o.handovers.reserve(
        key,
        leader.fence,
        this.#o.holder,
        DEFAULT_RESERVATION_MS,
      );
      if (asked) {
        this.#o.info(
          `asked ${leader.holder} (priority ${leader.priority}) to hand lease ${key} over to this process (priority ${joined.entry.priority}, --preempt)`,
        );
      }
    } catch (error) {
      this.#o.warn(`could not ask for lease ${key} by priority; trying again at the next refresh`, {
        err: (error as Error).message,
      });
    }
  }

  /** A notice is a hint: the row must show a live reservation of this very term for someone else. */
  async #handoverAsked(key: string): Promise<void> {
    const joined = this.#keys.get(key);
    // Closed (close() closes it as its electors begin to stop): no notice is a request any more.
    if (!joined || this.#closed) return;
    const row = await this.#o.handovers.reservation(key).catch((error: Error) => {
      this.#o.warn(`could not read the handover asked for lease ${key}; not handing over`, {
        err: error.message,
      });
      return null;
    });
    if (!row || row.reservedFor === null || row.reservedForMs <= 0) return;
    // This process is the target: whatever handover it took part in before is over, it claims now,
    // without waiting for a candidate of higher priority (the one leaving, often), which may not.
    if (row.reservedFor === this.#o.holder) {
      joined.priority.reserved(row.reservedForMs);
      return this.#reopen(joined);
    }
    const fence = joined.elector?.status().fence;
    if (!row.live || row.holder !== this.#o.holder || row.fence !== fence) return;
    if (joined.reopen) clearTimeout(joined.reopen);
    // Closed for the reservation: meanwhile the claim SQL refuses this holder anyway, and after it
    // this process campaigns again, in case the named candidate never claimed.
    joined.handover.unfit(`handover to ${row.reservedFor}`);
    joined.reopen = setTimeout(() => this.#reopen(joined), row.reservedForMs);
    joined.reopen.unref();
  }

  #reopen(joined: Joined): void {
    if (joined.reopen) clearTimeout(joined.reopen);
    joined.reopen = null;
    joined.handover.fit();
  }

  /** Stops refreshing and removes this process's rows. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#unsubscribe?.();
    if (this.#refresh) clearTimeout(this.#refresh);
    for (const joined of this.#keys.values()) {
      if (joined.reopen) clearTimeout(joined.reopen);
      joined.priority.close();
    }
    await this.#o.candidates.withdraw(this.#o.holder, [...this.#keys.keys()]).catch(() => {
      // Unreachable: the rows stop being live on their own.
    });
  }
}
