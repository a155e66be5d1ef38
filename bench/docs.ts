// `npm run bench:docs [-- --check]`: rewrites the figures of docs/performance.md and
// docs/operations.md (their <!-- bench:NAME --> regions) and bench/reference/failover.svg from
// bench/reference/results.json. --check writes nothing and exits 1 when a file differs.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { generateDocs } from "./docs/generate.ts";

const root = join(import.meta.dirname, "..");

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { check: { type: "boolean", default: false } }, strict: true });
  const stale = (await generateDocs(root)).filter((file) => file.current !== file.generated);
  for (const file of stale) {
    if (values.check) console.error(`${file.path}: differs from what bench/reference/results.json gives`);
    else await writeFile(join(root, file.path), file.generated);
  }
  if (values.check && stale.length > 0) {
    console.error("run: npm run bench:docs");
    return 1;
  }
  if (!values.check)
    console.log(stale.length === 0 ? "docs up to date" : `rewrote ${stale.map((f) => f.path).join(", ")}`);
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(`bench:docs failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 2;
  },
);
