// The real cluster for test/k3s: a one-node K3s and a PostgreSQL on one Docker network, and the
// pglease image built from the repository's Dockerfile and loaded into the node's containerd
// (no registry involved; the pods use imagePullPolicy Never).
import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { K3sContainer, type StartedK3sContainer } from "@testcontainers/k3s";
import { PostgreSqlContainer, type StartedPostgreSqlContainer } from "@testcontainers/postgresql";
import { GenericContainer, getContainerRuntimeClient, Network, type StartedNetwork } from "testcontainers";
import type { CleanupStack } from "./cleanup-stack.ts";
import { pollUntil } from "./poll.ts";

// Kubernetes 1.29+ runs the chart's native sidecar; the same minor as the repo's kubectl.
// PGLEASE_K3S_IMAGE tries another release.
const K3S_IMAGE = process.env.PGLEASE_K3S_IMAGE ?? "rancher/k3s:v1.35.3-k3s1";
const POSTGRES_IMAGE = "postgres:17-alpine";
const REPO_ROOT = join(import.meta.dirname, "..", "..");
const ARCHIVE_IN_NODE = "/tmp/pglease-image.tar";
const NODE_CONTAINERD = "/run/k3s/containerd/containerd.sock";

export interface ClusterEnvironment {
  k3s: StartedK3sContainer;
  /** For this process: the API server on its mapped port. */
  kubeConfigYaml: string;
  /** PostgreSQL as the pods reach it (see startPostgres). */
  databaseUrlForPods: string;
  /** PostgreSQL as this process reaches it, on its mapped port. */
  databaseUrlForTests: string;
  /** The pglease image as the pods name it; present in the node's containerd. */
  image: { repository: string; tag: string };
}

export async function startClusterEnvironment(cleanup: CleanupStack): Promise<ClusterEnvironment> {
  const tag = `k3s-test-${randomBytes(4).toString("hex")}`;
  const network = await new Network().start();
  cleanup.add("network", () => network.stop());
  // The image build (minutes on a cold cache) and the two containers do not depend on each other.
  const [, postgres, k3s] = await Promise.all([
    timed("pglease image built", () => buildImage(`pglease:${tag}`, cleanup)),
    timed("PostgreSQL started", () => startPostgres(network, cleanup)),
    timed("K3s started", () => startK3s(network, cleanup)),
  ]);
  await timed("pglease image loaded into K3s", () => loadImage(k3s, `pglease:${tag}`));
  return {
    k3s,
    kubeConfigYaml: k3s.getKubeConfig(),
    databaseUrlForPods: postgresUrl(postgres, postgres.getIpAddress(network.getName()), 5432),
    databaseUrlForTests: postgresUrl(postgres, postgres.getHost(), postgres.getMappedPort(5432)),
    image: { repository: "pglease", tag },
  };
}

/** Runs a command in the K3s node (crictl, ctr); a non-zero exit throws with its output. */
export async function execInNode(k3s: StartedK3sContainer, command: string[]): Promise<string> {
  const result = await k3s.exec(command);
  if (result.exitCode !== 0) {
    throw new Error(
      `${command.join(" ")} exited ${result.exitCode} in the K3s node: ${result.output.trim()}`,
    );
  }
  return result.stdout;
}

async function buildImage(name: string, cleanup: CleanupStack): Promise<void> {
  // Kept after the build (deleteOnExit false) because it is exported to K3s afterwards; removed
  // by the cleanup, not by the reaper at process exit.
  await GenericContainer.fromDockerfile(REPO_ROOT)
    .build(name, { deleteOnExit: false })
    .catch((error: unknown) => {
      // testcontainers keeps the build's output to its debug log.
      throw new Error(
        `building the pglease image from ${REPO_ROOT}/Dockerfile failed (${error instanceof Error ? error.message : String(error)}); rerun with DEBUG=testcontainers:build for the build log`,
      );
    });
  cleanup.add(`image ${name}`, async () => {
    const runtime = await getContainerRuntimeClient();
    await runtime.container.dockerode.getImage(name).remove();
  });
}

// Pods reach PostgreSQL by its address on the shared network, not by a network alias: pod DNS
// goes through CoreDNS, whose upstream is the node's resolver, and K3s will not forward to
// Docker's embedded resolver (a loopback address), so the alias does not resolve in pods. The
// address does answer: traffic leaving the pod network is masqueraded to the node's address on
// that same Docker network.
async function startPostgres(network: StartedNetwork, cleanup: CleanupStack) {
  const postgres = await new PostgreSqlContainer(POSTGRES_IMAGE)
    .withNetwork(network)
    .withDatabase("pglease")
    .withUsername("pglease")
    .withPassword(randomBytes(12).toString("hex"))
    .start();
  cleanup.add("PostgreSQL container", () => postgres.stop());
  return postgres;
}

async function startK3s(network: StartedNetwork, cleanup: CleanupStack): Promise<StartedK3sContainer> {
  // This process reaches the API server at the runtime's host: it must be in the certificate
  // (it already is for a local runtime, as localhost; not for a remote DOCKER_HOST).
  const { host } = (await getContainerRuntimeClient()).info.containerRuntime;
  // Only what the suite uses: no ingress, load balancer, metrics or storage add-ons to pull and run.
  const k3s = await new K3sContainer(K3S_IMAGE)
    .withNetwork(network)
    .withCommand([
      "server",
      "--disable=traefik",
      "--disable=servicelb",
      "--disable=metrics-server",
      "--disable=local-storage",
      `--tls-san=${host}`,
    ])
    // The module waits 120 s; here the image build competes for the same CPUs.
    .withStartupTimeout(300_000)
    .start();
  cleanup.add("K3s container", () => k3s.stop());
  return k3s;
}

// `docker save` through the runtime's API into a file (a tar entry needs its size up front),
// copied into the node and imported into the containerd namespace the kubelet uses.
async function loadImage(k3s: StartedK3sContainer, name: string): Promise<void> {
  const runtime = await getContainerRuntimeClient();
  const dir = await mkdtemp(join(tmpdir(), "pglease-k3s-image-"));
  try {
    const archive = join(dir, "image.tar");
    await pipeline(await runtime.container.dockerode.getImage(name).get(), createWriteStream(archive));
    await k3s.copyFilesToContainer([{ source: archive, target: ARCHIVE_IN_NODE }]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  await execInNode(k3s, [
    "ctr",
    "--address",
    NODE_CONTAINERD,
    "--namespace",
    "k8s.io",
    "images",
    "import",
    ARCHIVE_IN_NODE,
  ]);
  // The kubelet asks the CRI for docker.io/library/pglease:…, and the CRI learns of imported
  // images from containerd's events: wait until it answers, so a miss shows here and not as pods
  // stuck in ErrImageNeverPull.
  let lastAnswer = "";
  await pollUntil(
    `the K3s node's CRI to list docker.io/library/${name}`,
    30_000,
    async () => {
      const result = await k3s.exec(["crictl", "inspecti", `docker.io/library/${name}`]);
      lastAnswer = result.output.trim();
      return result.exitCode === 0 ? true : undefined;
    },
    () => lastAnswer,
  );
}

function postgresUrl(postgres: StartedPostgreSqlContainer, host: string, port: number): string {
  const url = new URL(`postgres://${host}:${port}/${postgres.getDatabase()}`);
  url.username = postgres.getUsername();
  url.password = postgres.getPassword();
  url.searchParams.set("sslmode", "disable");
  return url.toString();
}

async function timed<T>(what: string, run: () => Promise<T>): Promise<T> {
  const startedAt = performance.now();
  const result = await run();
  console.log(`[k3s suite] ${what} in ${((performance.now() - startedAt) / 1000).toFixed(1)} s`);
  return result;
}
