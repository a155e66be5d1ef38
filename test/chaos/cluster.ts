// The chaos run's world: its own PostgreSQL (restartable without disturbing other tests), or a
// primary with a streaming standby behind a proxy that follows failovers (--failover); the API
// server with one pod per replica (kube.ts); the label recorder; and the replicas. stop() takes
// all of it down, whatever state a failed start or a Ctrl-C left it in.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { createFenceGuard } from "../../src/fence/index.ts";
import type { RestartMode } from "../support/postgres/embedded-postgres.ts";
import { type FailoverPair, type Replication, startFailoverPair } from "../support/postgres/failover-pair.ts";
import { runPglease } from "../support/processes/cli.ts";
import { type ServerClock, startChaosPostgres } from "./faketime-postgres.ts";
import { type ApiServerChoice, type ChaosKube, startChaosKube } from "./kube.ts";
import type { LabelWatch } from "./label-watch.ts";
import { track } from "./processes.ts";
import type { Recorder } from "./recorder.ts";
import { Replica } from "./replica.ts";

export const NAMESPACE = "chaos";
export const ROLE_LABEL = "pglease.io/role";

/** The database as the faults see it: one embedded server, or the failover pair's primary. */
export interface ChaosDatabase {
  url: string;
  port: number;
  restart(options?: { mode?: RestartMode; downMs?: number }): Promise<void>;
  stop(): Promise<void>;
}

// The lease table's change log. AFTER ROW runs while the statement holds the row's lock, so seq
// (drawn here) follows the order in which the claims, renewals and releases committed.
// took_gone_session is the server's own witness, taken inside the claim's transaction, that the
// term this row replaced had recorded its holder's session (session takeover) and that session
// no longer existed: written out here rather than reusing the lease store's predicate.
export const CREATE_LEASE_LOG = `
  CREATE TABLE chaos_lease_log (
    seq BIGSERIAL PRIMARY KEY, key TEXT NOT NULL, holder TEXT NOT NULL, fence BIGINT NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL, expires_at TIMESTAMPTZ NOT NULL,
    logged_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(), took_gone_session BOOLEAN);
  CREATE FUNCTION chaos_log_lease() RETURNS trigger LANGUAGE plpgsql AS $$
  DECLARE took BOOLEAN := NULL;
  BEGIN
    IF TG_OP = 'UPDATE' AND (NEW.holder, NEW.fence) IS DISTINCT FROM (OLD.holder, OLD.fence) THEN
      took := OLD.session_fence = OLD.fence
        AND OLD.session_server_started_at = pg_postmaster_start_time()
        AND NOT EXISTS (SELECT 1 FROM pg_stat_activity
                         WHERE pid = OLD.session_pid AND backend_start = OLD.session_started_at);
    END IF;
    INSERT INTO chaos_lease_log (key, holder, fence, acquired_at, expires_at, took_gone_session)
    VALUES (NEW.key, NEW.holder, NEW.fence, NEW.acquired_at, NEW.expires_at, took);
    RETURN NULL;
  END $$;
  CREATE TRIGGER chaos_log_lease AFTER INSERT OR UPDATE ON pglease_leases
    FOR EACH ROW EXECUTE FUNCTION chaos_log_lease()`;

// The workloads' writes. Under the guard, seq is drawn after the guard row's lock is taken, so
// seq order is the order in which the guarded transactions committed.
const CREATE_WRITES = `
  CREATE TABLE chaos_writes (
    seq BIGSERIAL PRIMARY KEY, replica TEXT NOT NULL, fence BIGINT NOT NULL, issued_ms BIGINT NOT NULL,
    committed_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())`;

export interface ClusterSettings {
  replicas: number;
  lease: string;
  /** Every sidecar campaigns for these too (after `lease`, which its pod's label shows). */
  extraLeases: string[];
  leaseMs: number;
  retryMs: number;
  blockMs: number;
  guarded: boolean;
  /** The sidecars run with --session-takeover. */
  sessionTakeover: boolean;
  /** The sidecars run with --crash-takeover. */
  crashTakeover: boolean;
  /** A primary with a standby, replicating synchronously or not; one server when absent. */
  failover?: Replication;
  apiServer: ApiServerChoice;
  note(message: string): void;
}

export class ChaosCluster {
  readonly settings: ClusterSettings;
  readonly recorder: Recorder;
  readonly replicas: Replica[] = [];
  postgres: ChaosDatabase | null = null;
  /** The same database as `postgres` when it is a failover pair. */
  failover: FailoverPair | null = null;
  /** Steps the server's clock; null (and clockMissing says why) when it cannot. */
  clock: ServerClock | null = null;
  clockMissing: string | null = null;
  kube: ChaosKube | null = null;
  admin: pg.Pool | null = null;
  labels: LabelWatch | null = null;
  #dir: string | null = null;
  #stopped: Promise<void> | null = null;

  constructor(settings: ClusterSettings, recorder: Recorder) {
    this.settings = settings;
    this.recorder = recorder;
  }

  /** Starts everything; on failure stops what did start and rethrows. */
  async start(): Promise<void> {
    try {
      await this.#start();
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  async #start(): Promise<void> {
    const s = this.settings;
    this.#dir = await mkdtemp(join(tmpdir(), "pglease-chaos-"));
    if (s.failover) {
      this.failover = await startFailoverPair({ replication: s.failover, onSpawn: track });
      this.postgres = this.failover;
      this.clockMissing = "the failover pair runs without libfaketime";
    } else {
      const started = await startChaosPostgres();
      this.postgres = started.server;
      this.clock = started.clock;
      this.clockMissing = started.clockMissing;
    }
    const migrated = await runPglease(["migrate"], { DATABASE_URL: this.postgres.url });
    if (migrated.code !== 0) throw new Error(`pglease migrate failed: ${migrated.stderr.trim()}`);
    this.admin = new pg.Pool({ connectionString: this.postgres.url, max: 2 });
    this.admin.on("error", () => {});
    await this.admin.query(CREATE_LEASE_LOG);
    await this.admin.query(CREATE_WRITES);
    await createFenceGuard({ pool: this.admin }).migrate();

    this.kube = await startChaosKube({
      choice: s.apiServer,
      namespace: NAMESPACE,
      pods: this.podNames(),
      labels: { "app.kubernetes.io/name": "chaos", "app.kubernetes.io/instance": "run" },
      note: s.note,
    });
    this.labels = this.kube.watchLabels(ROLE_LABEL);
    for (const name of this.podNames()) {
      this.replicas.push(
        await Replica.start({
          name,
          namespace: NAMESPACE,
          lease: s.lease,
          extraLeases: s.extraLeases,
          leaseMs: s.leaseMs,
          retryMs: s.retryMs,
          blockMs: s.blockMs,
          databaseUrl: this.postgres.url,
          database: { host: "127.0.0.1", port: this.postgres.port },
          api: {
            ...this.kube.address,
            scheme: this.kube.scheme,
            caFile: this.kube.caFile,
            token: this.kube.tokenFor(name),
          },
          dir: this.#dir,
          guarded: s.guarded,
          sessionTakeover: s.sessionTakeover,
          crashTakeover: s.crashTakeover,
          recorder: this.recorder,
          note: s.note,
        }),
      );
    }
  }

  /** Pod names are the replica names. */
  podNames(): string[] {
    return Array.from({ length: this.settings.replicas }, (_, i) => `chaos-${i}`);
  }

  replica(name: string): Replica {
    const found = this.replicas.find((r) => r.name === name);
    if (!found) throw new Error(`no replica ${name}`);
    return found;
  }

  /** The replica that believes it leads and whose pod carries the leader label, if any. */
  labelledLeader(): string | null {
    const believed = this.recorder.believedLeader();
    return believed && this.labels?.roles.get(believed) === "leader" ? believed : null;
  }

  /** Stops every replica process and proxy; the database and the API server stay up. */
  async stopReplicas(): Promise<void> {
    await Promise.allSettled(this.replicas.map((r) => r.stop()));
    this.labels?.close();
  }

  /** Idempotent; never throws: every part is taken down even when another fails. */
  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      await this.stopReplicas();
      await this.admin?.end().catch(() => {});
      await this.kube?.close().catch(() => {});
      await this.postgres?.stop().catch(() => {});
      if (this.#dir) await rm(this.#dir, { recursive: true, force: true });
    })();
    return this.#stopped;
  }
}
