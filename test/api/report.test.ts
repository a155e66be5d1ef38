// The public surface is reviewed as a diff: api/*.api.md, one per entry point of package.json
// "exports", must be what API Extractor reports for the working tree. A change to what the package
// exports, or to any signature it exposes, fails here until the report is regenerated and committed.
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import { entryPoints, generateReports, reportFolder, UPDATE_COMMAND } from "./report.ts";

const update = `the public API changed: run \`${UPDATE_COMMAND}\`, review the diff of api/ and commit it`;

it("api/ holds one report per entry point, each as API Extractor reports the working tree", async () => {
  const reports = await generateReports();
  for (const [entry, generated] of reports) {
    const file = join(reportFolder, entry.file);
    expect(existsSync(file), `api/${entry.file} is missing: ${update}`).toBe(true);
    expect(generated, `api/${entry.file} (the surface of "${entry.subpath}"): ${update}`).toBe(
      await readFile(file, "utf8"),
    );
  }
  // A report of an entry point that is gone would keep reviewing a surface nobody ships.
  const expected = [...reports.keys()].map((e) => e.file).sort();
  expect((await readdir(reportFolder)).sort(), update).toEqual(expected);
}, 180_000);

it("the root exports only the application's runtime values; the building blocks only pglease/advanced", async () => {
  const [rootEntry, advancedEntry] = await entryPoints();
  expect([rootEntry?.subpath, advancedEntry?.subpath]).toEqual([".", "./advanced"]);
  const root = await import("../../src/index.ts");
  expect(Object.keys(root).sort()).toEqual([
    "CampaignSwitch",
    "HandoverNotTaken",
    "HandoverRefused",
    "HistoryMissingError",
    "LeadershipReadError",
    "LeaseTableMissingError",
    "ServerRefused",
    "SessionTakeoverUnavailable",
    "StaleFenceError",
    "StartAborted",
    "TimingError",
    "createFenceGuard",
    "openLeases",
    "readDownwardApi",
    "readStatusEndpoint",
    "watchDownwardApi",
    "withFence",
  ]);
  const advanced = await import("../../src/advanced.ts");
  expect(Object.keys(advanced).sort()).toEqual([
    "Elector",
    "PgLeaseStore",
    "PgReleaseFeed",
    "StatementNotSent",
    "assertTablePresent",
    "createLeasePool",
    "holderIdentity",
    "leaseTable",
    "migrate",
  ]);
});
