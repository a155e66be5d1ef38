// charts/pglease installed as a user would, with the image built here and the run's PostgreSQL:
// only the image and the database differ from the chart's defaults (and the replica count). The
// application container is a tiny HTTP server in the same image that answers with its pod's name,
// so a request through the leader Service says which pod it reached.
import { request } from "node:http";
import type { ClusterSession } from "./session.ts";

export const APP_PORT = 8080;
/**
 * Answers every request with the pod's name, and /ready (its readiness probe's path, where a suite
 * sets one) with 200 until a GET /unready turns it to 503, until a GET /ready-again. It exits on
 * SIGTERM itself: as a container's PID 1, Node without a handler would ignore it and hold the pod
 * for the whole grace period.
 */
const APP_SERVER = [
  "let ready = true;",
  `require("node:http").createServer((q, s) => {`,
  `if (q.url === "/ready") { s.statusCode = ready ? 200 : 503; return s.end(); }`,
  `if (q.url === "/unready" || q.url === "/ready-again") { ready = q.url === "/ready-again"; return s.end(); }`,
  `s.end(process.env.POD_NAME); }).listen(${APP_PORT});`,
  `process.on("SIGTERM", () => process.exit(0));`,
].join(" ");

export interface Release {
  name: string;
  namespace: string;
  /** The workload's pods (the chart's selector labels). */
  selector: string;
  leaderService: string;
  /** The chart's Deployment (and PodDisruptionBudget): the release's full name. */
  workload: string;
}

export function releaseValues(session: ClusterSession, databaseUrl: string, replicas: number) {
  const [repository, tag] = splitReference(session.image.reference);
  return {
    workload: { replicas },
    sidecar: { image: { repository, tag } },
    app: {
      image: { repository, tag },
      // POD_NAME: the chart gives every application container its pod's name.
      command: ["node", "-e", APP_SERVER],
    },
    database: { url: databaseUrl },
  };
}

function splitReference(reference: string): [string, string] {
  const colon = reference.lastIndexOf(":");
  return [reference.slice(0, colon), reference.slice(colon + 1)];
}

/** The names of a release of charts/pglease installed as `name` in `namespace`. */
export function releaseIn(name: string, namespace: string): Release {
  return {
    name,
    namespace,
    selector: `app.kubernetes.io/name=pglease,app.kubernetes.io/instance=${name}`,
    leaderService: `${name}-pglease-leader`,
    workload: `${name}-pglease`,
  };
}

export type Answer = { ok: true; body: string } | { ok: false; error: string };

/**
 * One GET to ip:port from the host (a ClusterIP through the node's kube-proxy rules, or a pod's
 * address); a refusal is an answer too.
 */
export function get(ip: string, port: number, timeoutMs = 2_000, path = "/"): Promise<Answer> {
  return new Promise((resolve) => {
    const req = request({ host: ip, port, path, timeout: timeoutMs, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ ok: true, body: Buffer.concat(chunks).toString() }));
      res.on("error", (error) => resolve({ ok: false, error: error.message }));
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", (error: NodeJS.ErrnoException) =>
      resolve({ ok: false, error: error.code ?? error.message }),
    );
    req.end();
  });
}
