// The command line at its edges (issue 31, point 5): a reader that goes away, a lease name with a
// typo, a misspelt flag, a role that may only read, a fatal start of `pglease run` that a log
// collector must see. The real command as a child process against a real PostgreSQL.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { freePort } from "../support/postgres/embedded-postgres.ts";
import { PGLEASE, runPglease, startPglease } from "../support/processes/cli.ts";
import { cliSuite } from "../support/processes/cli-suite.ts";

const suite = cliSuite();
const env = () => ({ DATABASE_URL: suite.db.url });

async function migrated(): Promise<void> {
  expect((await runPglease(["migrate"], env())).code).toBe(0);
}

async function insertLease(key: string, held: boolean): Promise<void> {
  await suite.admin.query(
    `INSERT INTO pglease_leases (key, holder, fence, acquired_at, expires_at)
     VALUES ($1, 'pod-a', 7, clock_timestamp() - interval '1 minute', clock_timestamp() + $2 * interval '1 second')`,
    [key, held ? 60 : -1],
  );
}

/** Runs pglease with stdout a pipe whose reader leaves after the first chunk, as `| head -1` does. */
function runUntilReaderLeaves(args: readonly string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [PGLEASE, ...args], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_NO_WARNINGS: "1", ...env() },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    child.stdout.once("data", () => child.stdout.destroy());
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`pglease ${args.join(" ")} kept running after its reader left:\n${stderr}`));
    }, 20_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe("a reader that goes away", () => {
  it("ends status --watch quietly, exit 0, as `pglease status --watch | head -2` does", async () => {
    await migrated();
    const out = await runUntilReaderLeaves(["status", "--watch", "--interval", "50ms"]);
    expect(out.stderr).toBe("");
    expect(out.code).toBe(0);
  });

  it("stops pglease run as SIGTERM does: the lease released, exit 0", async () => {
    await migrated();
    const out = await runUntilReaderLeaves(["run", "--lease", "piped", "--http-addr", "127.0.0.1:0"]);
    expect(out.stderr).toBe("");
    expect(out.code).toBe(0);
    const { rows } = await suite.admin.query(
      "SELECT count(*)::int AS live FROM pglease_leases WHERE key = 'piped' AND expires_at > clock_timestamp()",
    );
    expect(rows).toEqual([{ live: 0 }]);
  });
});

describe("pglease release KEY", () => {
  it("exits 1 for a lease that does not exist, suggesting the one meant; 0 for one not held now", async () => {
    await migrated();
    await insertLease("orders-sync", true);
    await insertLease("billing", false);
    const typo = await runPglease(["release", "ordrs-sync"], env());
    expect(typo.stdout).toBe("");
    expect(typo.stderr).toBe(
      'pglease release: no lease named "ordrs-sync" (did you mean orders-sync?); see pglease status\n',
    );
    expect(typo.code).toBe(1);
    // The lease it resembles is untouched.
    const { rows } = await suite.admin.query(
      "SELECT expires_at > now() AS live FROM pglease_leases WHERE key = 'orders-sync'",
    );
    expect(rows).toEqual([{ live: true }]);

    const notHeld = await runPglease(["release", "billing"], env());
    expect(notHeld.stdout).toBe("lease billing was not held: nothing to release\n");
    expect(notHeld.code).toBe(0);
  });
});

describe("a misspelt flag", () => {
  it("gets a did-you-mean and no second, cascaded problem", async () => {
    const run = await runPglease(["run", "--leese", "orders-sync"], env());
    expect(run.code).toBe(2);
    expect(JSON.parse(run.stdout).problems).toEqual(["unknown flag --leese (did you mean --lease?)"]);
    const release = await runPglease(["release", "--jsn", "orders-sync"], env());
    expect(release.code).toBe(2);
    expect(release.stderr).toContain("  - unknown flag --jsn; see --help for the flags this command takes\n");
    expect(release.stderr.match(/^ {2}- /gm)).toHaveLength(1);
    // Taken for --table, it carries the next word: the lease name is not also reported missing.
    const table = await runPglease(["release", "--tabel", "orders-sync"], env());
    expect(table.code).toBe(2);
    expect(table.stderr.match(/^ {2}- .*$/gm)).toEqual(["  - unknown flag --tabel (did you mean --table?)"]);
    const status = await runPglease(["status", "--jsno"], env());
    expect(status.stderr).toContain("  - unknown flag --jsno (did you mean --json?)\n");
    expect(status.stderr.match(/^ {2}- /gm)).toHaveLength(1);
    const command = await runPglease(["stauts"], env());
    expect(command.code).toBe(2);
    expect(command.stderr).toMatch(
      /^pglease: unknown command "stauts" \(did you mean status\?\); the commands are /,
    );
  });
});

describe("a role that may only read", () => {
  it("is told by pglease status to grant SELECT, not the writes that only pglease run needs", async () => {
    await migrated();
    const role = `reader_${randomBytes(4).toString("hex")}`;
    await suite.admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'reader-pw'`);
    try {
      const url = new URL(suite.db.url);
      url.username = role;
      url.password = "reader-pw";
      const denied = await runPglease(["status"], { DATABASE_URL: url.toString() });
      expect(denied.code).toBe(1);
      expect(denied.stderr).toBe(
        "pglease status: permission denied for table pglease_leases: pglease status only reads the lease table; " +
          'as its owner: GRANT SELECT ON "public"."pglease_leases" TO <this role>\n',
      );
      await suite.admin.query(`GRANT SELECT ON pglease_leases TO ${role}`);
      const allowed = await runPglease(["status"], { DATABASE_URL: url.toString() });
      expect(allowed.stderr).toBe("");
      expect(allowed.code).toBe(0);
    } finally {
      await suite.admin.query(`DROP OWNED BY ${role}; DROP ROLE ${role}`);
    }
  });
});

describe("a fatal start of pglease run", () => {
  const jsonLines = (stdout: string) =>
    stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);

  it("is a JSON line on stdout, like every other line it writes", async () => {
    const url = new URL(suite.db.url);
    url.password = "wrong-password";
    const port = await freePort();
    const out = await runPglease(
      ["run", "--lease", "orders", "--http-addr", `127.0.0.1:${port}`, "--start-timeout", "1s"],
      { DATABASE_URL: url.toString() },
    );
    expect(out.code).toBe(1);
    expect(out.stderr).toBe("");
    const last = jsonLines(out.stdout).at(-1);
    expect(last).toMatchObject({ level: "fatal", service: "pglease" });
    expect(String(last?.msg)).toMatch(/^PostgreSQL refused the login \(.*\): check the user and password/);
    expect(out.stdout).not.toContain("wrong-password");
  });

  it("and so is a usage error, every problem listed", async () => {
    const out = await runPglease(["run", "--duration", "soon"], env());
    expect(out.code).toBe(2);
    expect(out.stderr).toBe("");
    expect(jsonLines(out.stdout)).toEqual([
      expect.objectContaining({
        level: "fatal",
        service: "pglease",
        msg: "invalid usage or configuration; see 'pglease run --help'",
        problems: [
          "--lease (PGLEASE_LEASE) is required: name the lease(s), e.g. --lease orders-sync",
          '--duration: "soon" is not a duration; write a number and a unit, or several as Go does: 500ms, 15s, 1m30s, 1.5h, 30d',
        ],
      }),
    ]);
  });
});

describe("a second pglease run outside a pod", () => {
  it("warns about its restart lock in a laptop's words, not a pod's", async () => {
    await migrated();
    const first = suite.track(
      startPglease(["run", "--lease", "laptop", "--http-addr", "127.0.0.1:0"], env()),
    );
    await first.waitForLog(/^campaigning for laptop/);
    const second = suite.track(
      startPglease(["run", "--lease", "laptop", "--http-addr", "127.0.0.1:0"], env()),
    );
    const warning = await second.waitForLog(/^no restart takeover/);
    expect(warning.msg).toBe(
      "no restart takeover: another live process on this machine campaigns on the same lease table (a second pglease run, or the library; without POD_NAME the machine stands for the pod): this one waits for expiries",
    );
  });
});
