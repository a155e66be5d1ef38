// Finds fields the Kubernetes API does not declare (a misspelt or misplaced key), which the
// JSON schemas let through and an API server would silently drop. Each manifest becomes an
// object literal checked with `satisfies` against the Kubernetes type that kubernetes-models
// generates from the OpenAPI document; TypeScript's excess-property check then names every
// unknown key at any depth, and its type check every value of the wrong type.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import type { Manifest } from "./kubernetes-schemas.ts";

const run = promisify(execFile);
const repoRoot = join(import.meta.dirname, "..", "..");
// typescript's exports hide bin/tsc: find the package folder through its package.json.
const tsc = join(dirname(createRequire(import.meta.url).resolve("typescript/package.json")), "bin", "tsc");

/** The module and interface that type a manifest, from its apiVersion and kind. */
function typeOf(manifest: Manifest): { module: string; name: string } {
  const [group, version] = manifest.apiVersion.includes("/")
    ? manifest.apiVersion.split("/")
    : ["", manifest.apiVersion];
  const root =
    group === "monitoring.coreos.com" ? "@kubernetes-models/prometheus-operator" : "kubernetes-models";
  const path = group === "" ? `${version}/${manifest.kind}` : `${group}/${version}/${manifest.kind}`;
  return { module: `${root}/${path}`, name: `I${manifest.kind}` };
}

/** One problem per unknown field or mistyped value, naming the manifest and the offending line. */
export async function unknownFieldProblems(manifests: Manifest[]): Promise<string[]> {
  if (manifests.length === 0) return [];
  await mkdir(join(repoRoot, ".tmp"), { recursive: true });
  // Inside the repository, so the generated file resolves the project's node_modules.
  const dir = await mkdtemp(join(repoRoot, ".tmp", "unknown-fields-"));
  try {
    const lines: string[] = [];
    const owners: string[] = [];
    manifests.forEach((manifest, i) => {
      const type = typeOf(manifest);
      lines.push(`import type { ${type.name} as T${i} } from ${JSON.stringify(type.module)};`);
      owners.push("");
    });
    manifests.forEach((manifest, i) => {
      const body = JSON.stringify(manifest, null, 2).split("\n");
      body[0] = `export const m${i} = ${body[0]}`;
      body[body.length - 1] = `${body[body.length - 1]} satisfies T${i};`;
      for (const line of body) {
        lines.push(line);
        owners.push(`${manifest.kind}/${manifest.metadata?.name}`);
      }
    });
    await writeFile(join(dir, "manifests.ts"), `${lines.join("\n")}\n`);
    await writeFile(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          module: "NodeNext",
          moduleResolution: "NodeNext",
          skipLibCheck: true,
          types: [],
        },
        files: ["manifests.ts"],
      }),
    );
    try {
      await run(process.execPath, [tsc, "-p", join(dir, "tsconfig.json"), "--pretty", "false"], {
        maxBuffer: 16 * 1024 * 1024,
      });
      return [];
    } catch (error) {
      const output = String((error as { stdout?: string }).stdout ?? "");
      const problems = [...output.matchAll(/manifests\.ts\((\d+),\d+\): error TS\d+: (.*)/g)].map(
        ([, line, message]) => {
          const index = Number(line) - 1;
          return `${owners[index]}: ${message} (at ${lines[index]?.trim()})`;
        },
      );
      if (problems.length === 0) throw new Error(`tsc failed without a diagnostic: ${String(error)}`);
      return problems;
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
