// Validates rendered manifests (files given as arguments) against the Kubernetes schemas and
// the Kubernetes types; prints every problem and exits 1 when there is one. Run by check.sh.
import { readFile } from "node:fs/promises";
import { type Manifest, parseManifests, schemaProblems } from "./kubernetes-schemas.ts";
import { unknownFieldProblems } from "./unknown-fields.ts";

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node test/chart/validate-manifests.ts <manifests.yaml>...");
  process.exit(2);
}

let failed = false;
for (const file of files) {
  let manifests: Manifest[];
  try {
    manifests = parseManifests(await readFile(file, "utf8"), file);
  } catch (error) {
    console.error(`FAIL ${file}: ${error instanceof Error ? error.message : String(error)}`);
    failed = true;
    continue;
  }
  const problems = [...manifests.flatMap(schemaProblems), ...(await unknownFieldProblems(manifests))];
  if (problems.length > 0) failed = true;
  console.log(`${problems.length > 0 ? "FAIL" : "ok  "} ${file}: ${manifests.length} objects`);
  for (const problem of problems) console.log(`     ${problem}`);
}
process.exit(failed ? 1 : 0);
