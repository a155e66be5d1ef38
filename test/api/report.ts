// The public surface as API Extractor reports it: one report per entry point of package.json
// "exports", from the declarations TypeScript 7 emits for the build. API Extractor reads those
// .d.ts files with the TypeScript it bundles, so it needs nothing from TypeScript 7 but its output.
// `npm run api` writes the reports to api/; test/api/report.test.ts fails when they differ.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import {
  Extractor,
  ExtractorConfig,
  ExtractorLogLevel,
  ExtractorMessageCategory,
} from "@microsoft/api-extractor";

export const root = join(import.meta.dirname, "..", "..");
export const reportFolder = join(root, "api");
export const UPDATE_COMMAND = "npm run api";

export interface EntryPoint {
  /** As package.json "exports" names it: ".", "./advanced". */
  subpath: string;
  /** The report's file in api/: pglease.api.md, pglease-advanced.api.md. */
  file: string;
  /** Its declaration file in the build, relative to the package: ./dist/src/advanced.d.ts. */
  types: string;
}

/** Every entry point in package.json "exports" but package.json itself. */
export async function entryPoints(): Promise<EntryPoint[]> {
  const pkg = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as {
    name: string;
    exports: Record<string, string | { types?: string }>;
  };
  return Object.entries(pkg.exports)
    .filter(([subpath]) => subpath !== "./package.json")
    .map(([subpath, target]) => {
      const types = typeof target === "string" ? undefined : target.types;
      if (!types) throw new Error(`package.json exports["${subpath}"] names no "types"`);
      const name = subpath === "." ? pkg.name : `${pkg.name}-${subpath.slice(2).replaceAll("/", "-")}`;
      return { subpath, file: `${name}.api.md`, types };
    });
}

/** Each entry point's report as generated from the working tree now. */
export async function generateReports(): Promise<Map<EntryPoint, string>> {
  const work = await mkdtemp(join(tmpdir(), "pglease-api-"));
  try {
    const tsc = join(
      dirname(createRequire(import.meta.url).resolve("typescript/package.json")),
      "bin",
      "tsc",
    );
    const dts = join(work, "dts");
    await promisify(execFile)(
      process.execPath,
      [tsc, "-p", join(root, "tsconfig.build.json"), "--emitDeclarationOnly", "--outDir", dts],
      { cwd: root },
    );
    const reports = new Map<EntryPoint, string>();
    for (const entry of await entryPoints()) {
      reports.set(entry, await extract(entry, join(dts, entry.types.replace(/^\.\/dist\//, "")), work));
    }
    return reports;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function extract(entry: EntryPoint, declarations: string, work: string): Promise<string> {
  const out = join(work, "reports");
  await mkdir(out, { recursive: true });
  const config = ExtractorConfig.prepare({
    packageJsonFullPath: join(root, "package.json"),
    configObjectFullPath: undefined,
    configObject: {
      projectFolder: work,
      newlineKind: "lf",
      mainEntryPointFilePath: declarations,
      compiler: {
        overrideTsconfig: {
          compilerOptions: {
            module: "NodeNext",
            moduleResolution: "NodeNext",
            strict: true,
            allowImportingTsExtensions: true,
            noEmit: true,
            types: ["node"],
            typeRoots: [join(root, "node_modules", "@types")],
          },
          files: [declarations],
        },
      },
      apiReport: {
        enabled: true,
        reportFileName: entry.file.replace(/\.api\.md$/, ""),
        reportFolder: out,
        reportTempFolder: join(work, "temp"),
        // A type the entry point does not name but its signatures use (Leases.store's class, a
        // tick's Term) is shown too, under a warning, so a change to it is a diff as well.
        includeForgottenExports: true,
      },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        // No release tags: what an entry point exports is public, and the comments are prose, not TSDoc.
        extractorMessageReporting: {
          default: { logLevel: ExtractorLogLevel.Warning },
          "ae-missing-release-tag": { logLevel: ExtractorLogLevel.None },
          "ae-forgotten-export": { logLevel: ExtractorLogLevel.None, addToApiReportFile: true },
          "ae-undocumented": { logLevel: ExtractorLogLevel.None, addToApiReportFile: false },
        },
        tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
      },
    },
  });
  const problems: string[] = [];
  const result = Extractor.invoke(config, {
    localBuild: true,
    messageCallback: (message) => {
      // Console messages are about the report file in a temporary folder, which is always new.
      const serious =
        message.logLevel === ExtractorLogLevel.Error || message.logLevel === ExtractorLogLevel.Warning;
      if (serious && message.category !== ExtractorMessageCategory.Console) {
        problems.push(message.formatMessageWithLocation(work));
      }
      message.handled = true;
    },
  });
  if (!result.succeeded || problems.length > 0) {
    throw new Error(`API Extractor on ${entry.subpath}:\n${problems.join("\n")}`);
  }
  // The warnings at its end name the declarations by path: the build's, not this run's, and
  // without a line number, which an edit elsewhere in the file would change.
  return (await readFile(join(out, entry.file), "utf8"))
    .replaceAll(`${work}/dts/`, "dist/")
    .replace(/^(\/\/ dist\/\S+\.d\.ts):\d+:\d+ - /gm, "$1 - ");
}

if (process.argv[1] === import.meta.filename) {
  for (const [entry, text] of await generateReports()) {
    await writeFile(join(reportFolder, entry.file), text);
    process.stdout.write(`api/${entry.file}: the surface of "${entry.subpath}"\n`);
  }
}
