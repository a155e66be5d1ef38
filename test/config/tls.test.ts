// TLS to PostgreSQL with libpq's meaning and precedence (src/config/tls.ts): a setting in
// DATABASE_URL wins over its PGSSL* variable, the settings leave the URL handed to pg, and each
// mode gives node:tls the checks libpq makes. Every problem names where the setting came from.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveTls } from "../../src/config/tls.ts";

let dir: string;
let ca: string;
let cert: string;
let key: string;
const CA = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pglease-tls-"));
  ca = join(dir, "ca.crt");
  cert = join(dir, "client.crt");
  key = join(dir, "client.key");
  await writeFile(ca, CA);
  await writeFile(cert, "CERT");
  await writeFile(key, "KEY");
});
afterAll(async () => {
  await rm(dir, { recursive: true });
});

function resolve(url: string | undefined, env: NodeJS.ProcessEnv = {}) {
  const problems: string[] = [];
  return { ...resolveTls(url, env, problems), problems };
}

describe("modes", () => {
  it("none asked for: pg's own default, the URL unchanged", () => {
    expect(resolve("postgres://db/app")).toEqual({
      connectionString: "postgres://db/app",
      ssl: undefined,
      problems: [],
    });
    expect(resolve(undefined)).toEqual({ connectionString: undefined, ssl: undefined, problems: [] });
  });

  it("disable: no TLS at all", () => {
    expect(resolve(undefined, { PGSSLMODE: "disable" }).ssl).toBe(false);
  });

  it("require encrypts without verifying, unless a root certificate is given: then it checks the chain only", () => {
    expect(resolve(undefined, { PGSSLMODE: "require" }).ssl).toEqual({ rejectUnauthorized: false });
    const withCa = resolve(undefined, { PGSSLMODE: "require", PGSSLROOTCERT: ca }).ssl;
    expect(withCa).toMatchObject({ ca: CA, rejectUnauthorized: true });
    // The host name is not checked: checkServerIdentity accepts any.
    expect(
      withCa && typeof withCa === "object" && withCa.checkServerIdentity?.("other-host", {} as never),
    ).toBeUndefined();
  });

  it("verify-ca checks the chain only; verify-full, and a root certificate without a mode, also the host name", () => {
    expect(resolve(undefined, { PGSSLMODE: "verify-ca", PGSSLROOTCERT: ca }).ssl).toMatchObject({
      ca: CA,
      rejectUnauthorized: true,
      checkServerIdentity: expect.any(Function),
    });
    expect(resolve(undefined, { PGSSLMODE: "verify-full", PGSSLROOTCERT: ca }).ssl).toEqual({
      ca: CA,
      rejectUnauthorized: true,
    });
    expect(resolve(undefined, { PGSSLROOTCERT: ca }).ssl).toEqual({ ca: CA, rejectUnauthorized: true });
  });

  it("sends the client certificate and key", () => {
    expect(resolve(undefined, { PGSSLMODE: "verify-full", PGSSLCERT: cert, PGSSLKEY: key }).ssl).toEqual({
      cert: "CERT",
      key: "KEY",
      rejectUnauthorized: true,
    });
  });
});

describe("the URL and the variables", () => {
  it("a setting in the URL wins over its variable, and every TLS setting leaves the URL handed to pg", () => {
    const out = resolve(
      `postgres://app:pw@db/app?sslmode=verify-full&sslrootcert=${encodeURIComponent(ca)}&application_name=x`,
      {
        PGSSLMODE: "disable",
        PGSSLROOTCERT: join(dir, "missing.crt"),
      },
    );
    expect(out.problems).toEqual([]);
    expect(out.ssl).toEqual({ ca: CA, rejectUnauthorized: true });
    expect(out.connectionString).toBe("postgres://app:pw@db/app?application_name=x");
  });

  it("a variable fills in for what the URL does not say", () => {
    const out = resolve("postgres://db/app?sslmode=verify-ca", { PGSSLROOTCERT: ca });
    expect(out.ssl).toMatchObject({ ca: CA, rejectUnauthorized: true });
  });
});

describe("problems, each naming where the setting came from and what to do", () => {
  it("an unknown mode lists the modes", () => {
    expect(resolve("postgres://db/app?sslmode=sometimes").problems).toEqual([
      'sslmode in DATABASE_URL: "sometimes" is not an SSL mode; use one of disable, allow, prefer, require, verify-ca, verify-full',
    ]);
    expect(resolve(undefined, { PGSSLMODE: "on" }).problems).toEqual([
      'PGSSLMODE: "on" is not an SSL mode; use one of disable, allow, prefer, require, verify-ca, verify-full',
    ]);
  });

  it("allow and prefer, which would fall back to plain text, are refused with the modes to use", () => {
    for (const mode of ["allow", "prefer"]) {
      const out = resolve(undefined, { PGSSLMODE: mode });
      expect(out.ssl).toBeUndefined();
      expect(out.problems).toEqual([
        `PGSSLMODE: ${mode} would fall back to an unencrypted connection, which pglease cannot do; use require (encrypted), verify-full (encrypted, server verified) or disable`,
      ]);
    }
  });

  it("a file it cannot read: which setting, which file, why, and what to mount there; every one at once", () => {
    const missing = join(dir, "missing");
    const out = resolve(`postgres://db/app?sslcert=${encodeURIComponent(`${missing}.crt`)}`, {
      PGSSLMODE: "verify-full",
      PGSSLROOTCERT: `${missing}-ca.crt`,
      PGSSLKEY: `${missing}.key`,
    });
    expect(out.problems).toEqual([
      `PGSSLROOTCERT: cannot read ${missing}-ca.crt (ENOENT); mount the CA bundle there`,
      `sslcert in DATABASE_URL: cannot read ${missing}.crt (ENOENT); mount the client certificate there`,
      `PGSSLKEY: cannot read ${missing}.key (ENOENT); mount the client key there`,
    ]);
  });

  it("a URL pg cannot parse is left to the database config to report, without repeating it", () => {
    const out = resolve("not a url with:secret@", { PGSSLMODE: "require" });
    expect(out.problems).toEqual([]);
    expect(out.connectionString).toBe("not a url with:secret@");
  });
});
