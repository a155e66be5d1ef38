// Teardown for resources that take minutes to create. Each resource is registered the moment
// it exists, so a setup that fails halfway still releases what it made; and since a hook that
// timed out does not stop the work it started, anything registered after close() is released
// at once instead of leaking.

interface Step {
  name: string;
  release: () => Promise<unknown>;
}

export class CleanupStack {
  #steps: Step[] = [];
  #closed = false;

  add(name: string, release: () => Promise<unknown>): void {
    if (this.#closed) {
      void runStep({ name, release }).then((failure) => {
        if (failure) console.warn(`[k3s suite] late cleanup failed: ${failure}`);
      });
      return;
    }
    this.#steps.push({ name, release });
  }

  /** Releases everything in reverse order of creation; every step runs even when one fails. */
  async close(): Promise<void> {
    this.#closed = true;
    const failures: string[] = [];
    for (let step = this.#steps.pop(); step; step = this.#steps.pop()) {
      const failure = await runStep(step);
      if (failure) failures.push(failure);
    }
    if (failures.length > 0) throw new Error(`cleanup failed: ${failures.join("; ")}`);
  }
}

async function runStep(step: Step): Promise<string | undefined> {
  try {
    await step.release();
    return undefined;
  } catch (error) {
    return `${step.name}: ${error instanceof Error ? error.message : String(error)}`;
  }
}
