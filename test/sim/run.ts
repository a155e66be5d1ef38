// npm run sim -- --seeds N [--from S] | --seed S [--keep i,j] — see test/sim/README.md.
// Exit code 0: no violation; 1: a violation; 2: bad usage.
import { availableParallelism } from "node:os";
import { parseArgs } from "node:util";
import { type BatchResult, runParallel } from "./batch.ts";
import { VIOLATION_KINDS, type ViolationKind } from "./checker.ts";
import { DEFAULT_FAMILIES, describeFault, type Family, OPTIONAL_FAMILIES } from "./faults.ts";
import { BEFORE_FIXES } from "./lease-statements.ts";
import { SHIPPED } from "./profile.ts";
import { CLOCK_RATE_BOUND_PPM, makeScenario, type SimOptions } from "./scenario.ts";
import { runSchedule } from "./schedule.ts";
import { shrink } from "./shrink.ts";

const USAGE = `usage: npm run sim -- --seeds N [--from S] [--workers W]
       npm run sim -- --seed S [--keep i,j,…] [--no-shrink]
  --faults LIST          fault families: a list replaces the default, +name adds, -name removes
                         (default ${DEFAULT_FAMILIES.join(",")}; also ${OPTIONAL_FAMILIES.join(",")})
  --sql WHICH            shipped (default: what this branch ships, profile.ts) | before-fixes
                         (the SQL and pool before the fixes of issue 12, where known-holes.md was found)
  --monotonic-expiry     on top of --sql: expiry = greatest(old, now + d) within a term
  --fence-counter WHEN   over --sql: fences from a counter the row does not own (at-lock | at-start) or off
  --server-timeout       on top of --sql: statement_timeout = the call timeout on lease connections
  --clock-rate PPM       each process's clock runs within ±PPM of the server's (default ${CLOCK_RATE_BOUND_PPM}, 0: one rate)
  --ignore LIST          invariants not judged (to see what a known hole leads to)
  --only KIND            judge this invariant alone`;

function usage(problem: string): never {
  console.error(`${problem}\n${USAGE}`);
  process.exit(2);
}

function families(spec: string | undefined): Family[] {
  const known = new Set<string>([...DEFAULT_FAMILIES, ...OPTIONAL_FAMILIES]);
  let set = new Set<string>(DEFAULT_FAMILIES);
  if (!spec) return [...set] as Family[];
  const items = spec.split(",").filter(Boolean);
  if (items.some((i) => !/^[+-]/.test(i))) set = new Set();
  for (const item of items) {
    const name = item.replace(/^[+-]/, "");
    if (!known.has(name)) usage(`--faults: unknown family ${JSON.stringify(name)}`);
    if (item.startsWith("-")) set.delete(name);
    else set.add(name);
  }
  return [...set] as Family[];
}

function ignored(spec: string | undefined, only: string | undefined): ViolationKind[] {
  const kinds = (spec ?? "").split(",").filter(Boolean);
  for (const kind of [...kinds, ...(only ? [only] : [])]) {
    if (!VIOLATION_KINDS.includes(kind as ViolationKind)) usage(`unknown invariant ${JSON.stringify(kind)}`);
  }
  if (only && kinds.length > 0) usage("give --only or --ignore, not both");
  return only ? VIOLATION_KINDS.filter((k) => k !== only) : (kinds as ViolationKind[]);
}

/** The base SQL (--sql), with single fixes switched on over it. */
function sqlOptions(values: {
  sql?: string;
  "monotonic-expiry"?: boolean;
  "fence-counter"?: string;
  "server-timeout"?: boolean;
}): Pick<SimOptions, "sem" | "serverTimeout"> {
  const which = values.sql ?? "shipped";
  if (which !== "shipped" && which !== "before-fixes") {
    usage(`--sql must be shipped or before-fixes, got ${which}`);
  }
  const base = which === "shipped" ? SHIPPED : { sem: BEFORE_FIXES, serverTimeout: false };
  const counter = values["fence-counter"] ?? base.sem.fenceCounter;
  if (counter !== "off" && counter !== "at-lock" && counter !== "at-start") {
    usage(`--fence-counter must be off, at-lock or at-start, got ${counter}`);
  }
  return {
    sem: {
      ...base.sem,
      monotonicExpiry: Boolean(values["monotonic-expiry"]) || base.sem.monotonicExpiry,
      fenceCounter: counter,
    },
    serverTimeout: Boolean(values["server-timeout"]) || base.serverTimeout,
  };
}

function positive(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1) usage(`--${name} must be a positive whole number, got ${text}`);
  return n;
}

/** A clock rate bound in ppm: below a million, or every clock could stand still. */
function ppm(text: string | undefined): number {
  if (text === undefined) return CLOCK_RATE_BOUND_PPM;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0 || n >= 1_000_000) {
    usage(`--clock-rate must be a whole number of ppm from 0 to 999999, got ${text}`);
  }
  return n;
}

const describeSql = ({ sem, serverTimeout }: SimOptions) => {
  const shipped =
    JSON.stringify(sem) === JSON.stringify(SHIPPED.sem) && serverTimeout === SHIPPED.serverTimeout;
  if (shipped) return "SQL as shipped";
  const on = Object.entries(sem)
    .filter(([, v]) => v !== false && v !== "off")
    .map(([k, v]) => (v === true ? k : `${k} ${v}`));
  const sql = on.length === 0 ? "SQL before the fixes" : `SQL with only ${on.join(", ")}`;
  return `${sql}, server timeout ${serverTimeout ? "on" : "off"}`;
};

const describeOptions = (o: SimOptions) =>
  `${describeSql(o)}; faults ${[...o.families].join(",")}; clock rates ±${o.clockRatePpm ?? CLOCK_RATE_BOUND_PPM} ppm` +
  (o.ignore.length === 0
    ? ""
    : o.ignore.length === VIOLATION_KINDS.length - 1
      ? `; judged: ${VIOLATION_KINDS.filter((k) => !o.ignore.includes(k)).join(",")} alone`
      : `; not judged: ${o.ignore.join(",")}`);

async function batch(options: SimOptions, from: number, count: number, workers: number): Promise<number> {
  console.log(
    `pglease sim: seeds ${from}–${from + count - 1}, ${workers} worker(s); ${describeOptions(options)}`,
  );
  const started = performance.now();
  const result: BatchResult = await runParallel(
    { from, count, options: { ...options, families: [...options.families] } },
    workers,
  );
  const seconds = (performance.now() - started) / 1000;
  const kinds = Object.entries(result.failures) as Array<[ViolationKind, number[]]>;
  const failed = kinds.reduce((n, [, seeds]) => n + seeds.length, 0);
  for (const [kind, seeds] of kinds.sort((a, b) => b[1].length - a[1].length)) {
    const first = seeds.slice(0, 8).join(", ");
    console.log(
      `  ${kind.padEnd(27)} ${String(seeds.length).padStart(7)}  seeds ${first}${seeds.length > 8 ? ", …" : ""}`,
    );
  }
  const cpuSeconds = result.cpuMs / 1000;
  console.log(
    `${result.schedules} schedules, ${failed} with a violation; ${(result.simulatedMs / 1000).toFixed(0)} simulated s ` +
      `in ${seconds.toFixed(1)} s: ${(result.schedules / seconds).toFixed(0)} schedules/s ` +
      `(${(result.schedules / cpuSeconds).toFixed(0)} per CPU-second, ${cpuSeconds.toFixed(1)} CPU-s)`,
  );
  if (failed > 0) console.log(`replay one: npm run sim -- --seed ${kinds[0]?.[1][0]}`);
  return failed > 0 ? 1 : 0;
}

async function replay(options: SimOptions, seed: number, keep: number[] | undefined, shrinkIt: boolean) {
  const scenario = makeScenario(seed, options);
  const { timing } = scenario;
  console.log(
    `seed ${seed}: ${scenario.slots} processes, keys ${scenario.keys.join(",")}${scenario.sharedHolder ? ", p0 and p1 share a holder" : ""}; ` +
      `lease ${timing.leaseDurationMs} ms, renew ${timing.renewIntervalMs}, retry ${timing.retryIntervalMs}, ` +
      `margin ${timing.safetyMarginMs}, call timeout ${timing.callTimeoutMs}; ${describeOptions(options)}`,
  );
  for (const [i, f] of scenario.faults.entries()) console.log(`  fault ${i}: ${describeFault(f)}`);
  let result = await runSchedule(scenario, options, { keep, trace: true });
  let kept = keep;
  if (result.violation && shrinkIt && !keep) {
    const shrunk = await shrink(scenario, options, result.violation.kind);
    kept = shrunk.keep;
    console.log(
      `shrunk in ${shrunk.runs} runs to ${kept.length} of ${scenario.faults.length} faults: ${kept.join(",") || "none"}`,
    );
    result = await runSchedule(scenario, options, { keep: kept, trace: true });
  }
  console.log(result.trace.join("\n"));
  if (!result.violation) {
    console.log(`seed ${seed}: no violation (${result.simulatedMs.toFixed(0)} simulated ms)`);
    return 0;
  }
  const flags = process.argv
    .slice(2)
    .filter((a, i, all) => !a.startsWith("--keep") && all[i - 1] !== "--keep");
  console.log(`seed ${seed}: ${result.violation.kind}: ${result.violation.detail}`);
  if (kept) console.log(`replay: npm run sim -- ${flags.join(" ")} --keep ${kept.join(",") || "none"}`);
  return 1;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      seeds: { type: "string" },
      from: { type: "string" },
      seed: { type: "string" },
      keep: { type: "string" },
      workers: { type: "string" },
      faults: { type: "string" },
      sql: { type: "string" },
      "monotonic-expiry": { type: "boolean" },
      "fence-counter": { type: "string" },
      "server-timeout": { type: "boolean" },
      "clock-rate": { type: "string" },
      "no-shrink": { type: "boolean" },
      ignore: { type: "string" },
      only: { type: "string" },
      help: { type: "boolean" },
    },
  }).valueOf() as { values: Record<string, string | boolean | undefined> };
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const options: SimOptions = {
    families: new Set(families(values.faults as string | undefined)),
    ...sqlOptions(values),
    ignore: ignored(values.ignore as string | undefined, values.only as string | undefined),
    clockRatePpm: ppm(values["clock-rate"] as string | undefined),
  };
  if (values.seed !== undefined) {
    const keepText = values.keep as string | undefined;
    const keep =
      keepText === undefined ? undefined : keepText === "none" ? [] : keepText.split(",").map(Number);
    return replay(options, positive("seed", values.seed as string, 1), keep, !values["no-shrink"]);
  }
  if (values.seeds === undefined) usage("give --seeds N or --seed S");
  const workers = positive(
    "workers",
    values.workers as string | undefined,
    Math.min(availableParallelism(), 8),
  );
  const from = positive("from", values.from as string | undefined, 1);
  return batch(options, from, positive("seeds", values.seeds as string, 1), workers);
}

process.exitCode = await main();
