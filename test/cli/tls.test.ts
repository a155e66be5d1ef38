// TLS to a real PostgreSQL serving a certificate from a private CA generated here: every command
// takes sslmode/sslrootcert from the URL or the PGSSL* variables with libpq's precedence; a
// wrong CA and a wrong host name are refused with a message that names the fix.
import { execFile } from "node:child_process";
import { chown, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, serverUrl, type TestDatabase } from "../support/postgres/database.ts";
import { type Running, runPglease, startShortLeaseRun } from "../support/processes/cli.ts";

const run = promisify(execFile);
// Enabling TLS means changing the server's configuration: only on the suite's own server.
const own = process.env.DATABASE_URL === undefined;
if (!own) console.warn("[tls suite] skipped: DATABASE_URL names a server this suite must not reconfigure");

let dir: string;
let db: TestDatabase;
let admin: pg.Client;
const running: Running[] = [];

async function openssl(...args: string[]): Promise<void> {
  await run("openssl", args, { cwd: dir });
}

/** A CA, and a server certificate it signs for the name "localhost" only (not 127.0.0.1). */
async function makeCertificates(): Promise<void> {
  for (const ca of ["ca", "other-ca"]) {
    await openssl(
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "2",
      "-subj",
      `/CN=${ca}`,
      "-keyout",
      `${ca}.key`,
      "-out",
      `${ca}.crt`,
    );
  }
  await openssl(
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    "/CN=localhost",
    "-keyout",
    "server.key",
    "-out",
    "server.csr",
  );
  await writeFile(join(dir, "san.ext"), "subjectAltName=DNS:localhost\n");
  await openssl(
    "x509",
    "-req",
    "-in",
    "server.csr",
    "-CA",
    "ca.crt",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-days",
    "2",
    "-extfile",
    "san.ext",
    "-out",
    "server.crt",
  );
}

/** The URL of the test database with another host and extra parameters. */
function urlWith(host: string, params: Record<string, string> = {}): string {
  const url = new URL(db.url);
  url.hostname = host;
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return url.toString();
}

describe.skipIf(!own)("TLS with a private CA", () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "pglease-tls-"));
    await makeCertificates();
    admin = new pg.Client({ connectionString: serverUrl() });
    await admin.connect();
    // As root the server runs as "postgres", which must own its key (mode 600).
    if (userInfo().uid === 0) {
      const { stdout } = await run("id", ["-u", "postgres"]);
      const { stdout: gid } = await run("id", ["-g", "postgres"]);
      for (const f of ["server.key", "server.crt"]) await chown(join(dir, f), Number(stdout), Number(gid));
    }
    await run("chmod", ["755", dir]);
    await run("chmod", ["600", join(dir, "server.key")]);
    await admin.query(`ALTER SYSTEM SET ssl_cert_file = '${join(dir, "server.crt")}'`);
    await admin.query(`ALTER SYSTEM SET ssl_key_file = '${join(dir, "server.key")}'`);
    await admin.query("ALTER SYSTEM SET ssl = on");
    await admin.query("SELECT pg_reload_conf()");
    db = await createTestDatabase();
  });

  afterAll(async () => {
    for (const r of running.splice(0)) await r.stop("SIGKILL");
    await db?.drop();
    if (admin) {
      await admin.query("ALTER SYSTEM RESET ssl; ");
      await admin.query("ALTER SYSTEM RESET ssl_cert_file");
      await admin.query("ALTER SYSTEM RESET ssl_key_file");
      await admin.query("SELECT pg_reload_conf()");
      await admin.end();
    }
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("verify-full in the URL with the CA from PGSSLROOTCERT: migrate, status and run all connect over TLS", async () => {
    const env = {
      DATABASE_URL: urlWith("localhost", { sslmode: "verify-full" }),
      PGSSLROOTCERT: join(dir, "ca.crt"),
    };
    expect(await runPglease(["migrate"], env)).toMatchObject({ code: 0, stderr: "" });
    expect(await runPglease(["status"], env)).toMatchObject({ code: 0, stdout: "no leases yet\n" });
    const { run: sidecar } = await startShortLeaseRun("tls", env);
    running.push(sidecar);
    await sidecar.waitForLog(/^acquired lease tls with fence \d+$/);
    const { rows } = await admin.query<{ ssl: boolean }>(
      `SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
        WHERE a.datname = $1 AND a.application_name = 'pglease'`,
      [db.name],
    );
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((r) => r.ssl)).toBe(true);
  });

  it("sslrootcert in the URL wins over PGSSLROOTCERT (libpq's precedence)", async () => {
    const env = {
      DATABASE_URL: urlWith("localhost", { sslmode: "verify-full", sslrootcert: join(dir, "ca.crt") }),
      PGSSLROOTCERT: join(dir, "other-ca.crt"),
    };
    expect(await runPglease(["status"], env)).toMatchObject({ code: 0 });
  });

  it("refuses a certificate from another CA, saying where the CA goes", async () => {
    const env = {
      DATABASE_URL: urlWith("localhost", { sslmode: "verify-full" }),
      PGSSLROOTCERT: join(dir, "other-ca.crt"),
    };
    const out = await runPglease(["status"], env);
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/TLS certificate is not trusted .*point PGSSLROOTCERT/);
    expect(out.stderr.trim().split("\n")).toHaveLength(1);
  });

  it("refuses a host name the certificate does not list, and verify-ca accepts it", async () => {
    const ca = join(dir, "ca.crt");
    const wrongHost = await runPglease(["status"], {
      DATABASE_URL: urlWith("127.0.0.1", { sslmode: "verify-full" }),
      PGSSLROOTCERT: ca,
    });
    expect(wrongHost.code).toBe(1);
    expect(wrongHost.stderr).toMatch(/does not name the host connected to .*sslmode=verify-ca/);
    const chainOnly = await runPglease(["status"], {
      DATABASE_URL: urlWith("127.0.0.1", { sslmode: "verify-ca" }),
      PGSSLROOTCERT: ca,
    });
    expect(chainOnly.code).toBe(0);
  });

  it("rejects prefer, which pglease cannot honour, with exit 2", async () => {
    const out = await runPglease(["status"], { DATABASE_URL: urlWith("localhost", { sslmode: "prefer" }) });
    expect(out.code).toBe(2);
    expect(out.stderr).toContain(
      "sslmode in DATABASE_URL: prefer would fall back to an unencrypted connection",
    );
  });
});
