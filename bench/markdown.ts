// Prints the tables of a bench results file as Markdown:
//   node bench/markdown.ts [bench/results/latest.json]
// (docs/performance.md gets the reference's through npm run bench:docs.)
import { tables } from "./docs/performance.ts";
import { Reference } from "./docs/reference.ts";
import { runs } from "./docs/shared.ts";
import { readResults } from "./results.ts";

const document = await readResults(process.argv[2] ?? "bench/results/latest.json");
process.stdout.write(`${runs(new Reference(document))}\n\n${tables(document)}`);
