import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { LeadershipReadError, readStatusEndpoint } from "../../src/fence/index.ts";

const ordersSync = {
  lease: "orders-sync",
  role: "leader",
  fence: 42,
  leader: "web-7d9f-abc12",
  expiresAt: "2026-11-30T10:00:00.000Z",
  lastOutcome: "renewed",
  since: "2026-11-30T09:59:00.000Z",
};
const status = {
  holder: "web-7d9f-abc12",
  pod: { namespace: "default", name: "web-7d9f" },
  leases: [ordersSync],
};
const twoLeases = {
  ...status,
  leases: [
    ordersSync,
    { ...ordersSync, lease: "billing", role: "follower", fence: 7, leader: "web-other-zz" },
  ],
};

const routes: Record<string, (res: import("node:http").ServerResponse) => void> = {
  "/status": (res) => json(res, 200, status),
  "/two": (res) => json(res, 200, twoLeases),
  "/starting": (res) =>
    json(res, 200, { ...status, leases: [{ lease: "orders-sync", role: "follower", fence: null }] }),
  "/html": (res) => res.writeHead(200, { "content-type": "text/html" }).end("<h1>hello</h1>"),
  "/broken": (res) => json(res, 500, { error: "lease store unreachable" }),
  "/no-leases": (res) => json(res, 200, { holder: "x" }),
  "/bad-fence": (res) => json(res, 200, { ...status, leases: [{ ...ordersSync, fence: -3 }] }),
  "/hang": () => {},
};

let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const route = routes[req.url ?? ""];
    if (route) route(res);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

function json(res: import("node:http").ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(body));
}

it("reads the only lease without being told its name", async () => {
  expect(await readStatusEndpoint(`${base}/status`)).toEqual({
    role: "leader",
    lease: "orders-sync",
    fence: 42,
    source: "status-endpoint",
  });
});

it("picks the named lease among several", async () => {
  expect(await readStatusEndpoint(`${base}/two`, { lease: "billing" })).toEqual({
    role: "follower",
    lease: "billing",
    fence: 7,
    source: "status-endpoint",
  });
});

it("reads a lease with no fence yet as a follower with fence null", async () => {
  expect(await readStatusEndpoint(new URL(`${base}/starting`))).toMatchObject({
    role: "follower",
    fence: null,
  });
});

it("asks for a name when there are several leases, and lists them", async () => {
  await expect(readStatusEndpoint(`${base}/two`)).rejects.toThrow(
    /2 leases \("orders-sync", "billing"\).*lease/,
  );
});

it("names an unknown lease and the ones it knows", async () => {
  await expect(readStatusEndpoint(`${base}/status`, { lease: "payments" })).rejects.toThrow(
    /knows no lease "payments"; it reports "orders-sync"/,
  );
});

it("refuses an answer that is not JSON", async () => {
  const error = await readStatusEndpoint(`${base}/html`).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LeadershipReadError);
  expect((error as Error).message).toMatch(/did not answer JSON: "<h1>hello<\/h1>"/);
});

it("reports an HTTP error with its status and body", async () => {
  await expect(readStatusEndpoint(`${base}/broken`)).rejects.toThrow(
    /answered HTTP 500: .*lease store unreachable/,
  );
});

it("refuses JSON that breaks the contract", async () => {
  await expect(readStatusEndpoint(`${base}/no-leases`)).rejects.toThrow(/without a "leases" array/);
  await expect(readStatusEndpoint(`${base}/bad-fence`)).rejects.toThrow(
    /leases\["orders-sync"\]\.fence: a fence is a positive whole number, got -3/,
  );
});

it("gives up after the timeout", async () => {
  const started = performance.now();
  await expect(readStatusEndpoint(`${base}/hang`, { timeoutMs: 150 })).rejects.toThrow(
    /did not answer within 150 ms/,
  );
  expect(performance.now() - started).toBeLessThan(2000);
});

it("says the sidecar is not reachable when nothing listens", async () => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  await expect(readStatusEndpoint(`http://127.0.0.1:${port}/status`)).rejects.toThrow(
    /could not reach .* pglease sidecar running/,
  );
});
