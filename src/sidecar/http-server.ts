// One port for probes, leadership, status and metrics. Read-only: nothing here changes
// leadership, so it needs no authentication beyond where it listens.
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Address } from "../config/values.ts";
import type { Elector } from "../election/elector.ts";
import { holderCluster } from "../election/identity.ts";
import type { AppHealthView } from "./health-gate.ts";

const { createServer } = process.getBuiltinModule("node:http");

export interface HttpSources {
  /** Empty while the sidecar is starting (waiting for PostgreSQL). */
  electors(): readonly Elector[];
  /** Changes once, when the lease stack opens and appends the restart proof. */
  holder(): string;
  /** --cluster-name; null with one cluster. */
  cluster: string | null;
  pod: { namespace: string; name: string } | null;
  /** The health gate's input (the application's readiness and its age); null without a gate. */
  health?: () => (AppHealthView & { source: string }) | null;
  /** Null when healthy; otherwise why the loop counts as stalled. Starting counts as healthy. */
  stalled(): string | null;
  /** Null when ready; otherwise what is missing. */
  notReady(): Promise<string | null>;
  metrics(): Promise<{ contentType: string; body: string }>;
}

export interface StatusDocument {
  holder: string;
  cluster: string | null;
  pod: { namespace: string; name: string } | null;
  /** The health gate's input; null when leadership does not follow the application's health. */
  health: (AppHealthView & { source: string }) | null;
  leases: Array<{
    lease: string;
    role: "leader" | "follower";
    /** This process's own fence: null unless it leads. */
    fence: number | null;
    leader: string | null;
    /** The cluster the leader's holder identity names (--cluster-name); null when it names none. */
    leaderCluster: string | null;
    leaderFence: number | null;
    expiresAt: string | null;
    lastOutcome: string | null;
    since: string;
    /** Why this process does not campaign for the lease now (the health gate); null while it does. */
    notCampaigning: string | null;
  }>;
}

export function statusDocument(
  sources: Pick<HttpSources, "electors" | "holder" | "cluster" | "pod" | "health">,
): StatusDocument {
  return {
    holder: sources.holder(),
    cluster: sources.cluster,
    pod: sources.pod,
    health: sources.health?.() ?? null,
    leases: sources.electors().map((e) => {
      const s = e.status();
      return {
        lease: s.key,
        role: s.role,
        fence: s.fence,
        leader: s.leader,
        leaderCluster: holderCluster(s.leader),
        leaderFence: s.leaderFence,
        expiresAt: s.expiresAt?.toISOString() ?? null,
        lastOutcome: s.lastOutcome,
        since: s.since.toISOString(),
        notCampaigning: s.notCampaigning,
      };
    }),
  };
}

function send(res: ServerResponse, status: number, body: unknown, contentType = "application/json"): void {
  const text = typeof body === "string" ? body : `${JSON.stringify(body, null, 2)}\n`;
  res.writeHead(status, { "content-type": contentType, "cache-control": "no-store" });
  res.end(text);
}

async function route(sources: HttpSources, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://localhost");
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.setHeader("allow", "GET, HEAD");
    return send(res, 405, { error: `${req.method} is not allowed; these endpoints are read-only (GET)` });
  }
  const unknownParams = (allowed: string[]) =>
    [...url.searchParams.keys()].filter((k) => !allowed.includes(k));
  const params = unknownParams(url.pathname === "/leader" ? ["lease"] : []);
  if (params.length > 0) {
    return send(res, 400, {
      error: `unknown query parameter ${params.map((p) => JSON.stringify(p)).join(", ")} for ${url.pathname}`,
    });
  }
  switch (url.pathname) {
    case "/healthz": {
      // Alive while waiting for PostgreSQL: a liveness restart would only add crash-loop backoff.
      if (sources.electors().length === 0) return send(res, 200, { status: "starting" });
      const stalled = sources.stalled();
      return send(
        res,
        stalled ? 503 : 200,
        stalled ? { status: "stalled", reason: stalled } : { status: "ok" },
      );
    }
    case "/readyz": {
      const missing = await sources.notReady();
      return send(
        res,
        missing ? 503 : 200,
        missing ? { status: "not ready", reason: missing } : { status: "ready" },
      );
    }
    case "/leader":
      return leader(sources, url, res);
    case "/status":
      return send(res, 200, statusDocument(sources));
    case "/metrics": {
      const { contentType, body } = await sources.metrics();
      return send(res, 200, body, contentType);
    }
    default:
      return send(res, 404, {
        error: `no endpoint ${url.pathname}; try /healthz, /readyz, /leader, /status or /metrics`,
      });
  }
}

function leader(sources: HttpSources, url: URL, res: ServerResponse): void {
  const electors = sources.electors();
  const names = electors.map((e) => e.key);
  const asked = url.searchParams.get("lease");
  if (electors.length === 0) {
    send(res, 503, { lease: asked, role: "follower", fence: null, leader: null, reason: "starting" });
    return;
  }
  if (asked === null && names.length > 1) {
    send(res, 400, {
      error: `this process campaigns for several leases (${names.join(", ")}): add ?lease=NAME`,
    });
    return;
  }
  const elector = asked === null ? electors[0] : electors.find((e) => e.key === asked);
  if (!elector) {
    send(res, 400, {
      error: `unknown lease ${JSON.stringify(asked)}; this process campaigns for ${names.join(", ")}`,
    });
    return;
  }
  const s = elector.status();
  send(res, s.role === "leader" ? 200 : 503, {
    lease: s.key,
    role: s.role,
    fence: s.fence,
    leader: s.leader,
  });
}

export async function startHttpServer(
  address: Address,
  sources: HttpSources,
): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    route(sources, req, res).catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, { error: error instanceof Error ? error.message : String(error) });
      else res.end();
    });
  });
  server.keepAliveTimeout = 5_000;
  try {
    await listen(server, address);
  } catch (error) {
    // A node without IPv6 cannot listen on "::"; every IPv4 address is then what "all" means.
    const code = (error as NodeJS.ErrnoException).code;
    if (address.host !== "::" || (code !== "EAFNOSUPPORT" && code !== "EADDRNOTAVAIL")) throw error;
    await listen(server, { ...address, host: "0.0.0.0" });
  }
  return { server, port: (server.address() as AddressInfo).port };
}

function listen(server: Server, address: Address): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(address.port, address.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}
