// Crash failover in restart time: `pglease run` processes on a real PostgreSQL, killed and started
// again the way the kubelet restarts a container in the same pod. A process that binds its pod's
// restart lock has proven its predecessor dead and takes the live lease at once; anything that
// cannot prove it (a second process beside a live one, a pod recreated under the same name) waits.
import { describe, expect, it } from "vitest";
import { type Running, startLeaseRun } from "../support/processes/cli.ts";
import { cliSuite } from "../support/processes/cli-suite.ts";

const suite = cliSuite();

/** A container of pod `name`/`uid`, with a lease far longer than any wait in these tests. */
async function container(lease: string, pod: { name: string; uid: string }, extra: string[] = []) {
  const env = { DATABASE_URL: suite.db.url, POD_NAME: pod.name, POD_UID: pod.uid };
  return suite.track((await startLeaseRun(lease, "60s", env, extra)).run);
}

async function row(lease: string) {
  const { rows } = await suite.admin.query<{
    holder: string;
    fence: string;
    acquired_at: Date;
    expires_at: Date;
  }>("SELECT holder, fence::text, acquired_at, expires_at FROM pglease_leases WHERE key = $1", [lease]);
  const [found] = rows;
  if (!found) throw new Error(`no row for ${lease}`);
  return { ...found, fence: Number(found.fence) };
}

async function crash(run: Running): Promise<void> {
  const finished = await run.stop("SIGKILL");
  expect(finished.signal).toBe("SIGKILL");
}

describe("restart takeover", () => {
  it("the container restarted in the same pod takes its dead predecessor's live lease at once, with a new fence", async () => {
    const pod = { name: "orders-0", uid: "uid-restart-1" };
    const first = await container("restart", pod);
    await first.waitForLog(/^acquired lease restart/);
    const before = await row("restart");
    expect(before.holder).toMatch(/^orders-0-[0-9a-f]{8}#r:[0-9a-f]{32}\.[0-9]+$/);
    await crash(first);

    const second = await container("restart", pod);
    await second.waitForLog(/^acquired lease restart/);
    const after = await row("restart");
    expect(after.holder).not.toBe(before.holder);
    const lockOf = (holder: string) => holder.split("#r:")[1]?.split(".")[0];
    expect(lockOf(after.holder)).toBe(lockOf(before.holder));
    expect(after.fence).toBeGreaterThan(before.fence);
    // Taken while the dead term was still live on the server's clock: no wait for its expiry.
    expect(after.acquired_at.getTime()).toBeLessThan(before.expires_at.getTime());
  });

  it("a second process beside a live one (kubectl exec, two in one container) gets no lock and does not take over", async () => {
    const pod = { name: "orders-1", uid: "uid-exec" };
    const sidecar = await container("exec", pod);
    await sidecar.waitForLog(/^acquired lease exec/);
    const held = await row("exec");
    const exec = await container("exec", pod);
    await exec.waitForLog(/^no restart takeover: another live process of this pod holds the restart lock/);
    await exec.waitForLog(/^lease exec is held by/);
    expect(await row("exec")).toEqual(held);

    // The exec'd process never held the lock: once the sidecar dies, it still waits for the
    // expiry, while a restarted container (which binds the freed lock) takes over at once.
    await crash(sidecar);
    const restarted = await container("exec", pod);
    await restarted.waitForLog(/^acquired lease exec/);
    const after = await row("exec");
    expect(after.fence).toBeGreaterThan(held.fence);
    expect(after.acquired_at.getTime()).toBeLessThan(held.expires_at.getTime());
    expect(exec.output()).not.toMatch(/acquired lease exec/);
  });

  it("a pod recreated under the same name (a new uid) cannot prove the old one dead and waits", async () => {
    const old = await container("recreated", { name: "orders-2", uid: "uid-old" });
    await old.waitForLog(/^acquired lease recreated/);
    const held = await row("recreated");
    await crash(old);
    const recreated = await container("recreated", { name: "orders-2", uid: "uid-new" });
    const seen = await recreated.waitForLog(/^lease recreated is held by/);
    expect(String(seen.msg)).toContain(held.holder);
    expect(await row("recreated")).toEqual(held);
  });

  it("logs under the identity the table knows: the lease stack's later warnings carry the restart proof", async () => {
    const run = await container("logged", { name: "orders-4", uid: "uid-logged" });
    await run.waitForLog(/^acquired lease logged/);
    const { holder } = await row("logged");
    await suite.admin.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pglease-listen' AND datname = current_database()",
    );
    const warning = await run.waitForLog(/^release notices interrupted/);
    expect(warning.holder).toBe(holder);
  });

  it("--no-restart-takeover carries no proof and takes nothing over", async () => {
    const pod = { name: "orders-3", uid: "uid-off" };
    const first = await container("off", pod);
    await first.waitForLog(/^acquired lease off/);
    const held = await row("off");
    await crash(first);
    const second = await container("off", pod, ["--no-restart-takeover"]);
    const seen = await second.waitForLog(/^lease off is held by/);
    expect(String(seen.msg)).toContain(held.holder);
    expect(await row("off")).toEqual(held);
  });
});
