// A lane's teardown: every step is tried even when one fails (a process already gone, a server
// that would not stop), so nothing is left running; the first error is the one reported.

export async function tearDown(steps: Array<() => Promise<unknown> | undefined>): Promise<void> {
  let first: unknown;
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      first ??= error;
    }
  }
  if (first !== undefined) throw first;
}
