// Where the database is (src/config/database.ts): DATABASE_URL or libpq's PG* variables, the lease
// table's names and how the lease connections are set up. The URL is a secret: no problem ever
// repeats it, or its password.
import { describe, expect, it } from "vitest";
import {
  DATABASE_OPTIONS,
  type DatabaseConfig,
  readDatabaseConfig,
  redactUrl,
} from "../../src/config/database.ts";
import { readOptions } from "../../src/config/options.ts";

const SECRET = "hunter2-secret";
const URL_WITH_SECRET = `postgres://app:${SECRET}@db:5432/app`;

function read(argv: string[], env: NodeJS.ProcessEnv): { config: DatabaseConfig; problems: string[] } {
  const problems: string[] = [];
  const config = readDatabaseConfig(readOptions(DATABASE_OPTIONS, argv, env), env, problems);
  return { config, problems };
}

describe("where the database is", () => {
  it("takes DATABASE_URL (postgres:// or postgresql://), or leaves PGHOST, PGDATABASE or PGSERVICE to pg", () => {
    expect(read([], { DATABASE_URL: URL_WITH_SECRET }).config.connectionString).toBe(URL_WITH_SECRET);
    expect(read([], { DATABASE_URL: " postgresql://db/app " })).toMatchObject({
      config: { connectionString: "postgresql://db/app" },
      problems: [],
    });
    for (const env of [{ PGHOST: "db" }, { PGDATABASE: "app" }, { PGSERVICE: "leases" }]) {
      const { config, problems } = read([], env);
      expect(problems, JSON.stringify(env)).toEqual([]);
      expect(config.connectionString).toBeUndefined();
    }
  });

  it("without any, says both ways to give one", () => {
    expect(read([], { DATABASE_URL: "  ", PGUSER: "app" }).problems).toEqual([
      "no database given: set DATABASE_URL (postgres://USER:PASSWORD@HOST:5432/DATABASE) or the PGHOST, PGPORT, PGDATABASE, PGUSER and PGPASSWORD variables",
    ]);
  });

  it("refuses a URL that is not postgres://, and never shows it, nor its password", () => {
    for (const url of [
      `mysql://root:${SECRET}@db/x`,
      `${SECRET}`,
      `http://u:${SECRET}@db`,
      `postgres//u:${SECRET}@db`,
    ]) {
      const { problems } = read([], { DATABASE_URL: url });
      expect(problems, url).toEqual([
        "DATABASE_URL is not a postgres:// URL (its value is not shown: it may hold a password); use postgres://USER:PASSWORD@HOST:5432/DATABASE",
      ]);
    }
  });
});

describe("the lease table and its connections", () => {
  it("defaults: public.pglease_leases, prepared statements, timeouts sent at startup", () => {
    expect(read([], { PGHOST: "db" }).config).toMatchObject({
      schema: "public",
      table: "pglease_leases",
      preparedStatements: true,
      serverTimeouts: "startup",
      ssl: undefined,
    });
  });

  it("takes each from its flag or variable", () => {
    const { config, problems } = read(["--schema", "leases", "--no-prepared-statements"], {
      PGHOST: "db",
      PGLEASE_TABLE: "app_leases",
      PGLEASE_SERVER_TIMEOUTS: "role",
    });
    expect(problems).toEqual([]);
    expect(config).toMatchObject({
      schema: "leases",
      table: "app_leases",
      preparedStatements: false,
      serverTimeouts: "role",
    });
  });

  it("names the flag or variable of each bad value and what it takes, every one at once", () => {
    const { problems } = read(["--schema", "bad-name", "--server-timeouts", "connect"], {
      PGHOST: "db",
      PGLEASE_TABLE: "1table",
      PGLEASE_PREPARED_STATEMENTS: "sometimes",
    });
    const identifier =
      "must be a plain PostgreSQL identifier (letters, digits, underscore; not starting with a digit; at most 63 characters)";
    expect(problems).toEqual([
      'PGLEASE_PREPARED_STATEMENTS: "sometimes" is not a boolean; use true or false',
      '--server-timeouts: "connect" is not a way to set server timeouts; use startup or role',
      `--schema ${identifier}, got "bad-name"`,
      `PGLEASE_TABLE ${identifier}, got "1table"`,
    ]);
  });

  it("never repeats the URL's password in a problem, whatever else is wrong", () => {
    const { problems } = read(["--schema", "bad-name", "--server-timeouts", "x"], {
      DATABASE_URL: `${URL_WITH_SECRET}?sslmode=sometimes&sslrootcert=/nonexistent/${"ca"}.crt`,
      PGLEASE_PREPARED_STATEMENTS: "x",
    });
    expect(problems.length).toBeGreaterThanOrEqual(3);
    for (const problem of problems) {
      expect(problem).not.toContain(SECRET);
      expect(problem).not.toContain("app:");
    }
  });
});

describe("redactUrl", () => {
  it("hides the password and secret-looking parameters, keeps the rest to read", () => {
    expect(redactUrl(`postgres://app:${SECRET}@db:5432/app?sslpassword=x&application_name=y`)).toBe(
      "postgres://app:***@db:5432/app?sslpassword=***&application_name=y",
    );
    expect(redactUrl("postgres://app@db/app?sslkey=/k&apikey=z")).toBe(
      "postgres://app@db/app?sslkey=***&apikey=***",
    );
    // The names hideCredentials knows for a server's text: a token, an auth, a credential.
    expect(redactUrl("postgres://app@db/app?token=z&auth=w&credentials=v")).toBe(
      "postgres://app@db/app?token=***&auth=***&credentials=***",
    );
  });

  it("shows nothing of a URL it cannot parse, nor of one of another scheme (where a password is not where postgres:// has it)", () => {
    expect(redactUrl(`postgres//app:${SECRET}@db`)).toBe("(unparsable URL, hidden)");
    // Parsed as the scheme "app:" and a path: the secret would be printed as it is.
    expect(redactUrl(`app:${SECRET}@db`)).toBe("(unparsable URL, hidden)");
    expect(redactUrl(`mysql://root:${SECRET}@db`)).toBe("(unparsable URL, hidden)");
  });
});
