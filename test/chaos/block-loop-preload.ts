// Preloaded into each chaos replica (`node --import` via NODE_OPTIONS), never shipped in src/:
// on SIGUSR2 it blocks the event loop with a busy wait of CHAOS_BLOCK_MS, as a long GC pause or a
// runaway synchronous call would, and logs the exact window it blocked, so the checker knows the
// process could not act then. It also ends the replica when the chaos run that started it is gone.

const blockMs = Number(process.env.CHAOS_BLOCK_MS ?? "0");
const parent = process.ppid;

function logLine(fields: Record<string, unknown>, msg: string): void {
  // A pipe is written synchronously on Linux: the line is out before anything else runs.
  process.stdout.write(
    `${JSON.stringify({ level: "info", time: new Date().toISOString(), ...fields, msg })}\n`,
  );
}

if (Number.isSafeInteger(blockMs) && blockMs > 0) {
  process.on("SIGUSR2", () => {
    const from = Date.now();
    while (Date.now() - from < blockMs) {
      // Busy: timers, I/O and signal handlers all wait.
    }
    const to = Date.now();
    logLine(
      { chaos: "loop-block", blockedFrom: from, blockedTo: to },
      `chaos: event loop blocked for ${to - from} ms`,
    );
  });
}

// SIGKILL of the chaos run leaves no one to stop its replicas: re-parented means orphaned.
setInterval(() => {
  if (process.ppid !== parent) process.kill(process.pid, "SIGKILL");
}, 500).unref();
