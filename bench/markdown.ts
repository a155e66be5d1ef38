// Prints the tables of a bench results file as Markdown, for docs/performance.md:
//   node bench/markdown.ts [bench/results/latest.json]
import { readFile } from "node:fs/promises";
import { markdownTable, type ResultsDocument } from "./report.ts";

const path = process.argv[2] ?? "bench/results/latest.json";
const document = JSON.parse(await readFile(path, "utf8")) as ResultsDocument;
const { machine, database } = document;
const lines = [
  `Measured ${document.startedAt.slice(0, 10)} with \`${document.command}\`: ${machine.cpus} × ${machine.cpuModel}, ` +
    `${machine.memoryGb} GB, Node ${machine.node}, PostgreSQL ${database.version} (${database.source}, ` +
    `fsync ${database.settings.fsync ?? "?"}, synchronous_commit ${database.settings.synchronous_commit ?? "?"}); ` +
    `load average ${machine.loadAverage.atStart.toFixed(1)} at the start, ${machine.loadAverage.atEnd.toFixed(1)} at the end.`,
  ...document.tables.flatMap((table) => [
    "",
    markdownTable(table),
    "",
    ...table.notes.map((note) => `- ${note}`),
  ]),
];
process.stdout.write(`${lines.join("\n")}\n`);
