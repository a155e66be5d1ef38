// Issue 13's row DELETE as the pods show it: the server ended the leader's term behind its back, a
// follower claimed and took the old leader's label off once, and the old holder, still believing
// (its next renew had not told it yet), put its label back, two pods labelled leader until it
// learned. Real `pglease run` processes, a real PostgreSQL, both API servers; the old holder's
// database link is blackholed so it keeps believing for seconds, and the row is deleted by hand.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import pg from "pg";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import type { TestKube } from "../support/kube/kube-servers.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { type FaultProxy, startFaultProxy } from "../support/postgres/fault-proxy.ts";
import { type Running, startLeaseRun } from "../support/processes/cli.ts";

const NS = "rows";
const LEASE = "deleted-row";
const LABELS = { "app.kubernetes.io/name": "rows", "app.kubernetes.io/instance": "t" };

await onEachKubeServer("a deleted lease row on labelled pods", (server) => {
  let db: TestDatabase;
  let kube: TestKube;
  let proxy: FaultProxy;
  let dir = "";
  const running: Running[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
    kube = await server.start({ namespace: NS });
    const url = new URL(db.url);
    proxy = await startFaultProxy({ host: url.hostname, port: Number(url.port) });
    dir = await mkdtemp(join(tmpdir(), "pglease-kubeconfig-"));
    await writeFile(join(dir, "config"), kube.kubeConfig({ namespace: NS }).exportConfig());
  });
  afterEach(async () => {
    for (const r of running.splice(0)) await r.stop("SIGKILL");
  });
  afterAll(async () => {
    await proxy?.close();
    await kube?.close();
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  const role = async (pod: string) => (await kube.pod(NS, pod))?.metadata?.labels?.["pglease.io/role"];
  // A 10 s lease: a holder cut off from PostgreSQL believes for 3.3–6.7 s more (its local deadline).
  const sidecar = async (pod: string, databaseUrl: string) => {
    await kube.seedPod({ metadata: { name: pod, namespace: NS, labels: LABELS } } as V1Pod);
    const env = {
      DATABASE_URL: databaseUrl,
      KUBECONFIG: join(dir, "config"),
      POD_NAME: pod,
      POD_NAMESPACE: NS,
    };
    const started = await startLeaseRun(LEASE, "10s", env, ["--no-notify"]);
    running.push(started.run);
    return started;
  };

  it("the old holder does not keep its label back over the new leader's while it still believes", async () => {
    const old = await sidecar("rows-a", proxy.url(db.url));
    await old.run.waitForLog(/^acquired lease deleted-row with fence \d+$/);
    await expect.poll(() => role("rows-a"), { timeout: 10_000 }).toBe("leader");
    const next = await sidecar("rows-b", db.url);
    await next.run.waitForLog(/^lease deleted-row is held by/);

    proxy.blackhole();
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      await admin.query("DELETE FROM pglease_leases WHERE key = $1", [LEASE]);
    } finally {
      await admin.end();
    }
    await next.run.waitForLog(/^acquired lease deleted-row with fence \d+$/);
    // Before the fix the old holder put its label back after the new leader's one demotion, and
    // nothing took it off until the old holder's deadline.
    await expect
      .poll(async () => [await role("rows-a"), await role("rows-b")], { timeout: 3_000 })
      .toEqual(["follower", "leader"]);
    // It still believes: the labels settled between the publishers, not by its stepping down.
    expect((await fetch(`http://127.0.0.1:${old.port}/leader`)).status).toBe(200);
    await old.run.waitForLog(/^a peer is labelled leader by a newer term/);
  });
});
