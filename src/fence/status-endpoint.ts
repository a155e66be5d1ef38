// Reads leadership from the pglease sidecar's localhost HTTP `/status`. The answer is as fresh as
// the sidecar's last tick (at most one renew interval old), and no fresher than that.

import { parseFence } from "../shared/fence-token.ts";
import { ROLE } from "../shared/pod-contract.ts";
import { LeadershipReadError, type LeadershipReading, readFence } from "./leadership.ts";

export interface StatusEndpointOptions {
  /** Which lease to report; may be left out when the sidecar runs exactly one. */
  lease?: string;
  /** Default 2000 ms. Covers connecting, the answer and the body. */
  timeoutMs?: number;
}

export type StatusEndpointReading = LeadershipReading & { lease: string; source: "status-endpoint" };

interface StatusLease {
  lease: string;
  role: unknown;
  fence?: unknown;
}

const SOURCE = "status-endpoint";
const DEFAULT_TIMEOUT_MS = 2000;

/** Asks the sidecar at `url` (the full URL, e.g. http://127.0.0.1:8080/status) who leads. */
export async function readStatusEndpoint(
  url: string | URL,
  options: StatusEndpointOptions = {},
): Promise<StatusEndpointReading> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new TypeError(
      `readStatusEndpoint: timeoutMs must be a positive number of ms, got ${String(timeoutMs)}`,
    );
  }
  const body = await fetchStatus(url, timeoutMs);
  const leases = leasesOf(url, body);
  const entry = pickLease(url, leases, options.lease);
  return {
    role: entry.role === ROLE.leader ? ROLE.leader : ROLE.follower,
    lease: entry.lease,
    // A follower's fence is null: it holds no term.
    fence: readFence(SOURCE, () =>
      entry.fence === null || entry.fence === undefined
        ? null
        : parseFence(entry.fence, `leases[${JSON.stringify(entry.lease)}].fence`),
    ),
    source: SOURCE,
  };
}

async function fetchStatus(url: string | URL, timeoutMs: number): Promise<unknown> {
  let text: string;
  try {
    const response = await fetch(url, {
      signal: AbortSignal.timeout(timeoutMs),
      headers: { accept: "application/json" },
    });
    text = await response.text();
    if (!response.ok) {
      throw new LeadershipReadError(
        SOURCE,
        `${String(url)} answered HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ""}`,
      );
    }
  } catch (error) {
    if (error instanceof LeadershipReadError) throw error;
    if (error instanceof Error && error.name === "TimeoutError") {
      throw new LeadershipReadError(SOURCE, `${String(url)} did not answer within ${timeoutMs} ms`, {
        cause: error,
      });
    }
    throw new LeadershipReadError(
      SOURCE,
      `could not reach ${String(url)} (is the pglease sidecar running and serving status on that address?)`,
      { cause: error },
    );
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new LeadershipReadError(
      SOURCE,
      `${String(url)} did not answer JSON: ${JSON.stringify(text.slice(0, 200))}`,
      {
        cause: error,
      },
    );
  }
}

function leasesOf(url: string | URL, body: unknown): StatusLease[] {
  const leases = (body as { leases?: unknown } | null)?.leases;
  if (!Array.isArray(leases)) {
    throw new LeadershipReadError(SOURCE, `${String(url)} answered JSON without a "leases" array`);
  }
  return leases.map((entry, i) => {
    if (typeof entry !== "object" || entry === null || typeof (entry as StatusLease).lease !== "string") {
      throw new LeadershipReadError(SOURCE, `leases[${i}] has no "lease" name`);
    }
    return entry as StatusLease;
  });
}

function pickLease(url: string | URL, leases: StatusLease[], wanted: string | undefined): StatusLease {
  const names = leases.map((l) => JSON.stringify(l.lease)).join(", ") || "none";
  if (wanted === undefined) {
    const [only, ...more] = leases;
    if (only && more.length === 0) return only;
    throw new LeadershipReadError(
      SOURCE,
      `${String(url)} reports ${leases.length} leases (${names}); pass { lease } to say which one`,
    );
  }
  const entry = leases.find((l) => l.lease === wanted);
  if (!entry) {
    throw new LeadershipReadError(
      SOURCE,
      `${String(url)} knows no lease ${JSON.stringify(wanted)}; it reports ${names}`,
    );
  }
  return entry;
}
