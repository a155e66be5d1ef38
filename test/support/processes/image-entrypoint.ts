// How the image starts the CLI: its Dockerfile's ENTRYPOINT, ["node", ...flags, "dist/cmd/pglease.js"].
// The flags size V8 for the sidecar, so whatever measures the sidecar's memory (the chart's memory
// test, the bench's footprint group) runs the CLI with them, as the image does.
import { readFile } from "node:fs/promises";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..", "..", "..");

export interface ImageEntrypoint {
  /** Node's flags before the script, e.g. --max-semi-space-size=1. */
  nodeFlags: string[];
  /** The script, relative to the image's WORKDIR (/app): dist/cmd/pglease.js. */
  script: string;
}

export async function imageEntrypoint(): Promise<ImageEntrypoint> {
  const dockerfile = await readFile(join(ROOT, "Dockerfile"), "utf8");
  const exec = /^ENTRYPOINT (\[.*\])\s*$/m.exec(dockerfile)?.[1];
  if (exec === undefined) throw new Error("Dockerfile: no ENTRYPOINT in exec form");
  const argv = JSON.parse(exec) as string[];
  const [program, ...rest] = argv;
  const script = rest.pop();
  if (program !== "node" || script === undefined || !rest.every((flag) => flag.startsWith("--"))) {
    throw new Error(`Dockerfile: ENTRYPOINT ${exec} is not ["node", ...flags, script]`);
  }
  return { nodeFlags: rest, script };
}
