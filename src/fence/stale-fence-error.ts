/**
 * Thrown by the fence guard when a resource has already accepted a higher fence than the
 * writer's: a newer leader has written, so this process is no longer the leader (whatever it
 * still believes). Nothing the writer did in that transaction was committed.
 */
export class StaleFenceError extends Error {
  readonly resource: string;
  /** The fence this writer presented. */
  readonly fence: number;
  /** The highest fence the resource has accepted; always greater than `fence`. */
  readonly currentFence: number;

  constructor(resource: string, fence: number, currentFence: number) {
    super(
      `stale fence for resource ${JSON.stringify(resource)}: this writer holds fence ${fence} but the resource ` +
        `has already accepted fence ${currentFence}. A newer leader has written since this process won its lease, ` +
        "so it is no longer the leader; the transaction was rolled back and nothing was written. " +
        "Stop leader work and wait for a new term (a higher fence) instead of retrying." +
        (restartedFences(fence, currentFence) ? restartHint(currentFence) : ""),
    );
    this.name = "StaleFenceError";
    this.resource = resource;
    this.fence = fence;
    this.currentFence = currentFence;
  }
}

// Terms of one lease draw from one counter, so an earlier term's fence is rarely far below the
// next one's; a writer at half the accepted fence or less more likely comes from restarted fences.
function restartedFences(fence: number, currentFence: number): boolean {
  return currentFence >= 2 * fence;
}

function restartHint(currentFence: number): string {
  return (
    " The gap is large: if this process does hold the lease now, its lease's fences restarted, which happens " +
    "when lease rows, the lease table or its fence sequence were deleted or recreated (DELETE, TRUNCATE, DROP). " +
    "End terms with `pglease release`, never by deleting rows; to recover, advance the lease table's fence " +
    `sequence above ${currentFence}: SELECT setval('<schema>.<table>_fence', ${currentFence}).`
  );
}
