// Decides, once and fast, whether the real-cluster suite can run here. A machine without a
// container runtime must not pay for the suite: the probe is bounded and the heavy modules
// (Kubernetes client, chart tools) are only loaded once it answered.

export type RuntimeProbe = { available: true } | { available: false; reason: string };

// testcontainers tries its strategies in turn (DOCKER_HOST, config files, known sockets); an
// address that accepts connections but never answers would hang it, so the wait is capped.
const PROBE_TIMEOUT_MS = 3_000;

export async function probeContainerRuntime(env: NodeJS.ProcessEnv = process.env): Promise<RuntimeProbe> {
  for (const variable of ["PGLEASE_TEST_NO_K3S", "PGLEASE_TEST_NO_CONTAINERS"]) {
    if (env[variable] === "1") return { available: false, reason: `${variable}=1 is set` };
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<RuntimeProbe>((resolve) => {
    timer = setTimeout(
      () =>
        resolve({
          available: false,
          reason: `no container runtime answered within ${PROBE_TIMEOUT_MS / 1000} s`,
        }),
      PROBE_TIMEOUT_MS,
    );
  });
  const probe = import("testcontainers")
    .then(({ getContainerRuntimeClient }) => getContainerRuntimeClient())
    .then(
      (): RuntimeProbe => ({ available: true }),
      (error: unknown): RuntimeProbe => ({
        available: false,
        reason: `no container runtime answered (${error instanceof Error ? error.message : String(error)})`,
      }),
    );
  try {
    return await Promise.race([probe, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
