// What `pglease run` loads at start costs the sidecar resident memory for its whole life
// (issue 30: <= 64 MiB publishing). An ESM import of a built-in module builds its namespace from
// every export, lazy getters included: `import { createServer } from "node:http"` runs
// http.WebSocket's getter, which loads undici with http2 and the web streams, none of which
// pglease uses. src/ takes such built-ins from process.getBuiltinModule instead; this checks
// the module graph of `pglease run` in a fresh Node, as the CLI loads it.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const RUN_COMMAND = pathToFileURL(join(import.meta.dirname, "..", "..", "src", "cli", "run.ts")).href;

/** Internal modules that only an unused export's getter loads (the WebSocket of node:http). */
const NEVER_USED = ["internal/deps/undici/undici", "http2", "internal/webstreams/readablestream"];

describe("pglease run's module graph", () => {
  it("loads no built-in module that only a lazy export of another would", async () => {
    const script = `await import(${JSON.stringify(RUN_COMMAND)});
process.stdout.write(JSON.stringify(process.moduleLoadList));`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script]);
    const loaded = (JSON.parse(stdout) as string[])
      .filter((entry) => entry.startsWith("NativeModule "))
      .map((entry) => entry.slice("NativeModule ".length));
    expect(loaded).toContain("http");
    for (const name of NEVER_USED) expect(loaded, `${name} was loaded`).not.toContain(name);
  });
});
