// Who is waiting for the pod to show something (start, demote), and how long a role change
// took to reach the pod. Waits are bounded: a hung API server turns into `false`, never a hang.
import type { Clock } from "../shared/clock.ts";
import { KubeRequestError } from "./pod-api.ts";
import type { PatchObservation } from "./publisher-contract.ts";

type Verdict = boolean | null;

export function createPublishTracker(clock: Clock) {
  const now = () => clock.now();
  let roleChange: { role: string; at: number; reported: boolean } | null = null;
  const waiters = new Set<() => void>();

  return {
    roleChanged(role: string): void {
      roleChange = { role, at: now(), reported: false };
    },

    /** The first time the pod shows the newest role: how long it took since the change. */
    shown(role: string): { sinceChangeMs: number } | null {
      if (!roleChange || roleChange.reported || roleChange.role !== role) return null;
      roleChange.reported = true;
      return { sinceChangeMs: now() - roleChange.at };
    },

    /** Re-evaluates every pending wait; call after anything a predicate reads has changed. */
    notify(): void {
      for (const check of [...waiters]) check();
    },

    /** Resolves with the predicate's first non-null answer, or false on timeout or abort. */
    waitFor(predicate: () => Verdict, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
      return new Promise((resolve) => {
        const finish = (result: boolean) => {
          timer.cancel();
          waiters.delete(check);
          signal.removeEventListener("abort", onAbort);
          resolve(result);
        };
        const check = () => {
          const verdict = signal.aborted ? false : predicate();
          if (verdict !== null) finish(verdict);
        };
        const onAbort = () => finish(false);
        const timer = clock.setTimer(timeoutMs, () => finish(false));
        signal.addEventListener("abort", onAbort, { once: true });
        waiters.add(check);
        check();
      });
    },
  };
}
export type PublishTracker = ReturnType<typeof createPublishTracker>;

/** Runs one patch, timed on `clock`, and tells `onPatch` how it went. */
export async function observePatch<T>(
  clock: Clock,
  target: PatchObservation["target"],
  run: () => Promise<T>,
  onPatch: ((e: PatchObservation) => void) | undefined,
): Promise<T> {
  const started = clock.now();
  try {
    const result = await run();
    onPatch?.({ target, ok: true, durationMs: clock.now() - started });
    return result;
  } catch (error) {
    const status = error instanceof KubeRequestError ? error.status : undefined;
    onPatch?.({ target, ok: false, durationMs: clock.now() - started, ...(status ? { status } : {}) });
    throw error;
  }
}
