// The health gate probing the application's own HTTP endpoint (--health-gate url), on a real
// `pglease run` outside Kubernetes: no campaign while the endpoint says unhealthy, a claim as soon
// as it says healthy, a strict handover when it turns unhealthy (no peer list here), and the
// URL's query (a token) never in a log line.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, it } from "vitest";
import { runPglease, startLeaseRun } from "../support/processes/cli.ts";
import { cliSuite } from "../support/processes/cli-suite.ts";

const suite = cliSuite();
let app: Server | undefined;

afterEach(async () => {
  await new Promise((resolve) => app?.close(resolve) ?? resolve(undefined));
  app = undefined;
});

/** The application's health endpoint, answering `health.status`. */
async function application(): Promise<{ url: string; port: number; health: { status: number } }> {
  const health = { status: 503 };
  app = createServer((_, res) => {
    res.writeHead(health.status).end();
  });
  await new Promise<void>((resolve) => app?.listen(0, "127.0.0.1", resolve));
  const { port } = app.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/healthz?token=s3cret-token`, port, health };
}

async function sidecar(lease: string, url: string, extra: string[] = []) {
  const env = { DATABASE_URL: suite.db.url };
  const args = [
    "--health-url",
    url,
    "--health-interval",
    "100ms",
    "--health-grace",
    "500ms",
    "--health-settle",
    "500ms",
    ...extra,
  ];
  return suite.track((await startLeaseRun(lease, "3s", env, args)).run);
}

it("campaigns only while the endpoint answers 2xx, and never logs the URL's query", async () => {
  const { url, health } = await application();
  const run = await sidecar("health-url-1", url);
  await run.waitForLog(
    /^not campaigning for lease health-url-1 \(free\): application unready \(GET http:\/\/127\.0\.0\.1:\d+\/healthz answered 503\)$/,
  );
  health.status = 200;
  await run.waitForLog(/^acquired lease health-url-1 with fence \d+$/);

  // Without peers (no Kubernetes) and without --health-strict it keeps the lease, and says why.
  health.status = 500;
  await run.waitForLog(
    /keeping the lease: the peers could not be listed \(outside Kubernetes there is no peer list; --health-strict hands over without one\)/,
  );
  expect(run.output()).not.toMatch(/handed over/);
  expect(run.output()).not.toContain("s3cret");
});

it("with --health-strict hands over when the endpoint stops answering 2xx, and claims again after the settle period", async () => {
  const { url, health } = await application();
  health.status = 200;
  const run = await sidecar("health-url-2", url, ["--health-strict"]);
  const first = await run.waitForLog(/^acquired lease health-url-2 with fence \d+$/);
  health.status = 503;
  await run.waitForLog(
    /^handed over lease health-url-2 \(fence \d+\): application unready for more than 0\.5s \(GET http:\/\/127\.0\.0\.1:\d+\/healthz answered 503\)$/,
  );
  const { rows } = await suite.admin.query(
    "SELECT expires_at <= now() AS free FROM pglease_leases WHERE key = 'health-url-2'",
  );
  expect(rows[0]?.free).toBe(true);
  health.status = 200;
  // The first line matching wins: the new term's has another fence.
  const again = await run.waitForLog(
    new RegExp(`^acquired lease health-url-2 with fence (?!${first.fence}$)\\d+$`),
  );
  expect(Number(again.fence)).toBeGreaterThan(Number(first.fence));
});

it("exits 1 when its HTTP port is taken, the health probe already started stopping with it", async () => {
  const { url, port } = await application(); // the port is taken by the application itself
  const args = ["run", "--lease", "health-url-3", "--http-addr", `127.0.0.1:${port}`, "--health-url", url];
  const exit = await runPglease(args, { DATABASE_URL: suite.db.url }, 20_000);
  expect(exit.code).toBe(1);
  expect(exit.stdout + exit.stderr).toMatch(/EADDRINUSE/);
});
