// TLS to PostgreSQL with libpq's meaning and precedence: a setting in the connection URL
// (sslmode, sslrootcert, sslcert, sslkey) wins over its environment variable (PGSSLMODE,
// PGSSLROOTCERT, PGSSLCERT, PGSSLKEY). pg alone lets the URL's sslmode replace the TLS options
// entirely (a CA given in PGSSLROOTCERT was ignored), so the settings are resolved here, once,
// for every command, and stripped from the URL handed to pg.
import type { ConnectionOptions } from "node:tls";

const { readFileSync } = process.getBuiltinModule("node:fs");

export const SSL_MODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"];

const SETTINGS = [
  { param: "sslmode", env: "PGSSLMODE" },
  { param: "sslrootcert", env: "PGSSLROOTCERT" },
  { param: "sslcert", env: "PGSSLCERT" },
  { param: "sslkey", env: "PGSSLKEY" },
] as const;

type Setting = (typeof SETTINGS)[number]["param"];

export interface ResolvedTls {
  /** The URL without its TLS parameters (they are in `ssl`); undefined when none was given. */
  connectionString: string | undefined;
  /** False: no TLS. Undefined: none asked for. Otherwise the options for node:tls. */
  ssl: false | ConnectionOptions | undefined;
}

export function resolveTls(url: string | undefined, env: NodeJS.ProcessEnv, problems: string[]): ResolvedTls {
  const parsed = parseUrl(url);
  const given = new Map<Setting, { value: string; source: string }>();
  for (const { param, env: variable } of SETTINGS) {
    const fromUrl = parsed?.searchParams.get(param)?.trim();
    const fromEnv = env[variable]?.trim();
    if (fromUrl) given.set(param, { value: fromUrl, source: `${param} in DATABASE_URL` });
    else if (fromEnv) given.set(param, { value: fromEnv, source: variable });
    parsed?.searchParams.delete(param);
  }
  const connectionString = parsed ? parsed.toString() : url;
  const mode = given.get("sslmode");
  if (mode && !SSL_MODES.includes(mode.value)) {
    problems.push(
      `${mode.source}: ${JSON.stringify(mode.value)} is not an SSL mode; use one of ${SSL_MODES.join(", ")}`,
    );
    return { connectionString, ssl: undefined };
  }
  if (mode?.value === "disable") return { connectionString, ssl: false };
  if (mode?.value === "allow" || mode?.value === "prefer") {
    problems.push(
      `${mode.source}: ${mode.value} would fall back to an unencrypted connection, which pglease cannot do; ` +
        "use require (encrypted), verify-full (encrypted, server verified) or disable",
    );
    return { connectionString, ssl: undefined };
  }
  const files = readFiles(given, problems);
  if (!mode && !files.ca) return { connectionString, ssl: undefined };
  return { connectionString, ssl: tlsOptions(mode?.value, files) };
}

function parseUrl(url: string | undefined): URL | null {
  if (url === undefined) return null;
  try {
    return new URL(url);
  } catch {
    return null; // reported by the database config, without repeating the URL
  }
}

function readFiles(
  given: Map<Setting, { value: string; source: string }>,
  problems: string[],
): { ca?: string; cert?: string; key?: string } {
  const read = (setting: Setting, what: string) => {
    const file = given.get(setting);
    if (!file) return undefined;
    try {
      return readFileSync(file.value, "utf8");
    } catch (error) {
      problems.push(
        `${file.source}: cannot read ${file.value} (${(error as NodeJS.ErrnoException).code}); mount the ${what} there`,
      );
      return undefined;
    }
  };
  const files = {
    ca: read("sslrootcert", "CA bundle"),
    cert: read("sslcert", "client certificate"),
    key: read("sslkey", "client key"),
  };
  return Object.fromEntries(Object.entries(files).filter(([, v]) => v !== undefined));
}

/**
 * libpq's modes: require encrypts without verifying, unless a root certificate is given (then it
 * verifies the chain like verify-ca); verify-ca checks the chain; verify-full, and a root
 * certificate without a mode, also check the host name.
 */
function tlsOptions(
  mode: string | undefined,
  files: { ca?: string; cert?: string; key?: string },
): ConnectionOptions {
  const chainOnly = { rejectUnauthorized: true, checkServerIdentity: () => undefined };
  const base =
    mode === "require"
      ? files.ca
        ? chainOnly
        : { rejectUnauthorized: false }
      : mode === "verify-ca"
        ? chainOnly
        : { rejectUnauthorized: true };
  return { ...files, ...base };
}
