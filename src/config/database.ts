// Where the database is: DATABASE_URL, or the standard libpq PG* variables that pg reads
// itself. The URL is a secret (it may carry a password): no message ever repeats it.
import type { ConnectionOptions } from "node:tls";
import { CREDENTIAL_NAME } from "../shared/hide-credentials.ts";
import { identifierProblem } from "../shared/sql-identifier.ts";
import type { OptionSpec, RawOptions } from "./options.ts";
import { resolveTls } from "./tls.ts";
import { parseBoolean } from "./values.ts";

export const DATABASE_OPTIONS: readonly OptionSpec[] = [
  {
    flag: "schema",
    env: "PGLEASE_SCHEMA",
    value: "NAME",
    help: "schema of the lease table",
    defaultText: "public",
  },
  { flag: "table", env: "PGLEASE_TABLE", value: "NAME", help: "lease table", defaultText: "pglease_leases" },
  {
    flag: "prepared-statements",
    env: "PGLEASE_PREPARED_STATEMENTS",
    boolean: true,
    help: "use named prepared statements (turn off behind PgBouncer < 1.21 in transaction mode)",
    defaultText: "true",
  },
  {
    flag: "server-timeouts",
    env: "PGLEASE_SERVER_TIMEOUTS",
    value: "startup|role",
    help:
      "how lease connections get statement_timeout and lock_timeout: sent when connecting (startup), or set " +
      "on the role with ALTER ROLE … SET (role; behind PgBouncer in transaction mode, which refuses them)",
    defaultText: "startup",
  },
];

export interface DatabaseConfig {
  /** Undefined: pg reads PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE itself. */
  connectionString: string | undefined;
  /** From sslmode/sslrootcert/sslcert/sslkey in the URL, else the PGSSL* variables (see tls.ts). */
  ssl: false | ConnectionOptions | undefined;
  schema: string;
  table: string;
  preparedStatements: boolean;
  serverTimeouts: "startup" | "role";
}

export function readDatabaseConfig(
  raw: RawOptions,
  env: NodeJS.ProcessEnv,
  problems: string[],
): DatabaseConfig {
  const url = env.DATABASE_URL?.trim() || undefined;
  if (url !== undefined) {
    let protocol = "";
    try {
      protocol = new URL(url).protocol;
    } catch {
      protocol = "invalid";
    }
    if (protocol !== "postgres:" && protocol !== "postgresql:") {
      problems.push(
        "DATABASE_URL is not a postgres:// URL (its value is not shown: it may hold a password); " +
          "use postgres://USER:PASSWORD@HOST:5432/DATABASE",
      );
    }
  } else if (!env.PGHOST && !env.PGDATABASE && !env.PGSERVICE) {
    problems.push(
      "no database given: set DATABASE_URL (postgres://USER:PASSWORD@HOST:5432/DATABASE) " +
        "or the PGHOST, PGPORT, PGDATABASE, PGUSER and PGPASSWORD variables",
    );
  }
  const text = (flag: string, fallback: string) => {
    const value = raw.values.get(flag);
    if (!value) return fallback;
    const problem = identifierProblem(value.source, value.text);
    if (problem) problems.push(problem);
    return value.text;
  };
  const prepared = raw.values.get("prepared-statements");
  let preparedStatements = true;
  if (prepared) {
    const parsed = parseBoolean(prepared.text);
    if ("problem" in parsed) problems.push(`${prepared.source}: ${parsed.problem}`);
    else preparedStatements = parsed.value;
  }
  const serverTimeouts = raw.values.get("server-timeouts");
  if (serverTimeouts && serverTimeouts.text !== "startup" && serverTimeouts.text !== "role") {
    problems.push(
      `${serverTimeouts.source}: ${JSON.stringify(serverTimeouts.text)} is not a way to set server timeouts; use startup or role`,
    );
  }
  const tls = resolveTls(url, env, problems);
  return {
    connectionString: tls.connectionString,
    ssl: tls.ssl,
    schema: text("schema", "public"),
    table: text("table", "pglease_leases"),
    preparedStatements,
    serverTimeouts: serverTimeouts?.text === "role" ? "role" : "startup",
  };
}

const HIDDEN = "(unparsable URL, hidden)";

/**
 * A connection string the user gave, safe to print: the password, if any, and every parameter
 * named like a credential (hide-credentials.ts's names) replaced; unparsable, all of it hidden.
 */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    // Another scheme puts no password where postgres:// does: `user:secret@db` parses as a
    // scheme and a path, the secret in plain sight.
    if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") return HIDDEN;
    if (parsed.password) parsed.password = "***";
    for (const key of [...parsed.searchParams.keys()]) {
      if (CREDENTIAL_NAME.test(key)) parsed.searchParams.set(key, "***");
    }
    return parsed.toString();
  } catch {
    return HIDDEN;
  }
}
