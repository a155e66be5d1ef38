// The restart lock through the public openLeases(): a proof in the holder only while this opening
// holds the pod's lock, none for a second opening beside it, the lock freed once close() has ended
// every campaign; and the token scoped to the network namespace the lock's exclusivity rests on.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { restartProof } from "../../src/election/identity.ts";
import { type LeaseLogger, openLeases } from "../../src/index.ts";
import { networkNamespace, restartToken } from "../../src/postgres/restart-lock.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

const run = promisify(execFile);
const LOCK_PROBE = fileURLToPath(new URL("../support/processes/restart-lock-probe.ts", import.meta.url));

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

function recordingLogger(): LeaseLogger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, info: () => {}, warn: (message) => warnings.push(message) };
}

const pod = { name: "lib-0", uid: "uid-lib" };

describe("the restart lock of an opening", () => {
  it("is held by one opening at a time, and freed only by close()", async () => {
    const first = await openLeases({ connectionString: db.url, pod, logger: recordingLogger() });
    expect(restartProof(first.holder)?.token).toMatch(/^[0-9a-f]{32}$/);

    const besideLogger = recordingLogger();
    const beside = await openLeases({ connectionString: db.url, pod, logger: besideLogger });
    expect(restartProof(beside.holder)).toBeNull();
    expect(besideLogger.warnings).toContainEqual(
      expect.stringMatching(/^no restart takeover: another live process of this pod holds the restart lock/),
    );
    await beside.close();

    await first.close();
    const next = await openLeases({ connectionString: db.url, pod, logger: recordingLogger() });
    expect(restartProof(next.holder)?.token).toBe(restartProof(first.holder)?.token);
    expect(restartProof(next.holder)?.boundAt).toBeGreaterThan(restartProof(first.holder)?.boundAt ?? 0n);
    await next.close();
  });

  it("restartTakeover: false carries no proof and takes no lock", async () => {
    const off = await openLeases({ connectionString: db.url, pod, restartTakeover: false });
    const on = await openLeases({ connectionString: db.url, pod, logger: recordingLogger() });
    expect(restartProof(off.holder)).toBeNull();
    expect(restartProof(on.holder)).not.toBeNull();
    await Promise.all([off.close(), on.close()]);
  });

  it("a holder that would forge a proof is refused, naming the field", async () => {
    await expect(openLeases({ connectionString: db.url, holder: `me#r:${"0".repeat(32)}` })).rejects.toThrow(
      /holder "me#r:0+" contains "#r:", which pglease reserves for the restart proof/,
    );
  });
});

describe("the restart lock beside other threads and processes of one program", () => {
  it("two cluster workers cannot both hold it (the primary would share one socket), nor can a worker thread", async () => {
    const { stdout } = await run(process.execPath, [LOCK_PROBE]);
    const lines = stdout.trim().split("\n").sort();
    expect(lines).toEqual([
      "cluster worker: no restart lock",
      "cluster worker: restart lock",
      "worker thread: no restart lock (the restart lock belongs to a process's main thread, not a worker thread)",
    ]);
  });
});

describe("the restart token", () => {
  const scope = { podUid: "u", podName: "p", database: "db:5432/x", table: '"public"."pglease_leases"' };
  const ns = networkNamespace();

  it("names this pod and table in this network namespace of this boot, and nothing else", () => {
    if (!ns) throw new Error("the restart lock needs Linux's /proc: this suite runs on Linux");
    const token = restartToken(scope, ns);
    // Another namespace (another pod, or a node that vanished and its pod elsewhere) or another boot.
    expect(restartToken(scope, { ...ns, namespace: "net:[1]" })).not.toBe(token);
    expect(restartToken(scope, { ...ns, bootId: "other-boot" })).not.toBe(token);
    for (const change of [{ podUid: "v" }, { podName: "q" }, { database: "db:5432/y" }, { table: "t" }]) {
      expect(restartToken({ ...scope, ...change }, ns)).not.toBe(token);
    }
    expect(restartToken({ ...scope }, { ...ns })).toBe(token);
  });
});
