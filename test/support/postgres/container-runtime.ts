// Whether a container runtime answers, for the tests and the bench that prefer a
// testcontainers PostgreSQL when one does.
export async function containerRuntimeAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import("testcontainers");
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}
