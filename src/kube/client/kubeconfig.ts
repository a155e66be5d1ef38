// The connection a kubeconfig file gives (KUBECONFIG, for running outside a cluster): its current
// context's cluster and user, files merged as kubectl merges them (the first file that names a
// cluster, user or context, or sets current-context, wins). Authentication by token, token file,
// client certificate, basic auth or an exec plugin; anything else is refused at start, by name.
import { delimiter, dirname, isAbsolute, join } from "node:path";
import { type KubeConnection, parseJson } from "./connection.ts";
import { bearerFromFile } from "./in-cluster.ts";

const { readFileSync } = process.getBuiltinModule("node:fs");
const { promisify } = process.getBuiltinModule("node:util");

type Fields = Record<string, unknown>;
interface Named {
  name: string;
  fields: Fields;
  /** The directory of the file it came from: relative paths in it are relative to that file. */
  dir: string;
}
interface Merged {
  currentContext?: string;
  clusters: Map<string, Named>;
  users: Map<string, Named>;
  contexts: Map<string, Named>;
}

/** The connection of KUBECONFIG's current context. The YAML parser loads only here, never in a cluster. */
export async function kubeconfigConnection(env: NodeJS.ProcessEnv = process.env): Promise<KubeConnection> {
  const files = (env.KUBECONFIG ?? "").split(delimiter).filter((f) => f.trim() !== "");
  const merged: Merged = { clusters: new Map(), users: new Map(), contexts: new Map() };
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      throw new Error(`KUBECONFIG: cannot read ${file}: ${(error as Error).message}`);
    }
    mergeInto(merged, await parseDocument(text, file), dirname(file));
  }
  return connectionOf(merged, `KUBECONFIG (${files.join(delimiter)})`);
}

/** Parses one kubeconfig's text (JSON or YAML); `dir` resolves the relative paths in it. */
export async function kubeconfigTextConnection(text: string, dir = "."): Promise<KubeConnection> {
  const merged: Merged = { clusters: new Map(), users: new Map(), contexts: new Map() };
  mergeInto(merged, await parseDocument(text, "kubeconfig"), dir);
  return connectionOf(merged, "kubeconfig");
}

async function parseDocument(text: string, file: string): Promise<Fields> {
  const json = text.trimStart().startsWith("{");
  try {
    const parsed: unknown = json ? JSON.parse(text) : (await import("yaml")).parse(text);
    return typeof parsed === "object" && parsed !== null ? (parsed as Fields) : {};
  } catch (error) {
    // Where, never what: V8's SyntaxError quotes the text around the fault and yaml's message ends
    // with the offending line, either of which may be a token or a client key.
    const where = json ? "not valid JSON" : ((error as Error).message.split("\n")[0] ?? "").replace(/:$/, "");
    throw new Error(
      `KUBECONFIG: ${file} is not a kubeconfig: ${where} (its text not quoted: it may hold credentials)`,
    );
  }
}

function mergeInto(merged: Merged, doc: Fields, dir: string): void {
  merged.currentContext ??= (doc["current-context"] as string | undefined) || undefined;
  for (const [list, key] of [
    [merged.clusters, "cluster"],
    [merged.users, "user"],
    [merged.contexts, "context"],
  ] as const) {
    for (const entry of (doc[`${key}s`] as Array<Fields> | undefined) ?? []) {
      const name = entry.name as string;
      if (typeof name === "string" && !list.has(name))
        list.set(name, { name, fields: (entry[key] as Fields) ?? {}, dir });
    }
  }
}

function connectionOf(merged: Merged, where: string): KubeConnection {
  const contextName = merged.currentContext;
  if (!contextName) throw new Error(`${where}: no current-context; set one with kubectl config use-context`);
  const context = merged.contexts.get(contextName);
  if (!context) throw new Error(`${where}: current-context "${contextName}" is not among its contexts`);
  const cluster = merged.clusters.get(context.fields.cluster as string);
  if (!cluster)
    throw new Error(
      `${where}: context "${contextName}" names cluster "${context.fields.cluster}", which is not defined`,
    );
  const c = cluster.fields;
  if (typeof c.server !== "string") throw new Error(`${where}: cluster "${cluster.name}" has no server`);
  if (c["proxy-url"])
    throw new Error(`${where}: cluster "${cluster.name}" uses proxy-url, which pglease does not support`);
  const user = merged.users.get(context.fields.user as string) ?? { name: "", fields: {}, dir: "." };
  const u = user.fields;
  const credential =
    user.name && typeof u.exec === "object" ? execCredential(u.exec as Fields, user.dir) : undefined;
  return {
    server: new URL(c.server),
    tls: {
      ca: material(c, "certificate-authority", cluster.dir),
      cert: material(u, "client-certificate", user.dir),
      key: material(u, "client-key", user.dir),
      rejectUnauthorized: c["insecure-skip-tls-verify"] !== true,
      ...(typeof c["tls-server-name"] === "string" ? { servername: c["tls-server-name"] } : {}),
    },
    authorization: authorizationOf(u, user, where, credential),
  };
}

function authorizationOf(
  u: Fields,
  user: Named,
  where: string,
  credential: (() => Promise<string>) | undefined,
): () => Promise<string | undefined> {
  if (u["auth-provider"]) {
    const provider = (u["auth-provider"] as Fields).name;
    throw new Error(
      `${where}: user "${user.name}" uses auth-provider "${provider}", which pglease does not support; use a token, a client certificate or an exec plugin`,
    );
  }
  if (typeof u.token === "string") return async () => `Bearer ${u.token}`;
  if (typeof u.tokenFile === "string") return bearerFromFile(resolvePath(u.tokenFile, user.dir));
  if (typeof u.username === "string") {
    const basic = Buffer.from(`${u.username}:${u.password ?? ""}`).toString("base64");
    return async () => `Basic ${basic}`;
  }
  if (credential) return async () => `Bearer ${await credential()}`;
  return async () => undefined;
}

/** A `<name>-data` (base64) field, or the file `<name>` names. */
function material(fields: Fields, name: string, dir: string): Buffer | undefined {
  const data = fields[`${name}-data`];
  if (typeof data === "string") return Buffer.from(data, "base64");
  const file = fields[name];
  return typeof file === "string" ? readFileSync(resolvePath(file, dir)) : undefined;
}

function resolvePath(file: string, dir: string): string {
  return isAbsolute(file) ? file : join(dir, file);
}

/** Runs an exec plugin; node:child_process is loaded only then, as most sidecars run none (issue 30, memory). */
function run(file: string, args: string[], options: { env: NodeJS.ProcessEnv }): Promise<{ stdout: string }> {
  return promisify(process.getBuiltinModule("node:child_process").execFile)(file, args, options);
}

/** A client-go credential plugin: its token, cached until the expiry it states. */
function execCredential(exec: Fields, dir: string): () => Promise<string> {
  let cached: { token: string; expires: number } | undefined;
  const command = exec.command as string;
  const resolved = command.includes("/") ? resolvePath(command, dir) : command;
  const env = Object.fromEntries(((exec.env as Fields[] | null) ?? []).map((e) => [e.name, e.value]));
  const info = { apiVersion: exec.apiVersion, kind: "ExecCredential", spec: { interactive: false } };
  return async () => {
    if (cached && cached.expires > Date.now()) return cached.token;
    const { stdout } = await run(resolved, (exec.args as string[] | null) ?? [], {
      env: { ...process.env, ...env, KUBERNETES_EXEC_INFO: JSON.stringify(info) },
    });
    const status = parseJson<{ status?: { token?: string; expirationTimestamp?: string } }>(
      stdout,
      `the kubeconfig exec plugin ${command} printed no ExecCredential JSON`,
    ).status;
    if (!status?.token) throw new Error(`the kubeconfig exec plugin ${command} returned no token`);
    const expires = status.expirationTimestamp
      ? Date.parse(status.expirationTimestamp)
      : Number.POSITIVE_INFINITY;
    cached = { token: status.token, expires };
    return status.token;
  };
}
