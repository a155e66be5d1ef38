// `pglease handover KEY [--to POD|HOLDER]`: a planned move of leadership. The lease is reserved
// for the target in the row, the leader hears it at once, ends its work, demotes its pod and
// releases; the target claims first. Waits until the target leads or the reservation passes.

import {
  DEFAULT_RESERVATION_MS,
  HandoverNotTaken,
  HandoverRefused,
  type HandoverRequest,
  handOver,
} from "../candidacy/plan.ts";
import { type OptionSpec, optionHelp } from "../config/options.ts";
import { parseDuration } from "../config/values.ts";
import { CandidateStore } from "../postgres/candidates.ts";
import { HandoverStore } from "../postgres/handover.ts";
import { databaseHelp, openDatabaseCommand } from "./database-command.ts";

const OPTIONS: readonly OptionSpec[] = [
  {
    flag: "to",
    value: "POD|HOLDER",
    help: "the live candidate to hand over to (default: the best by priority)",
  },
  {
    flag: "reservation",
    value: "DURATION",
    help: "how long only the target may claim; after it anyone may",
    defaultText: "10s",
  },
  { flag: "json", boolean: true, help: "print JSON (stable field names, for scripts)" },
];

export const HANDOVER_HELP = `Usage: pglease handover KEY [--to POD|HOLDER] [flags]

Moves the leadership of lease KEY to a live candidate (see pglease candidates): the
lease is reserved for it, the leader hears it at once (LISTEN/NOTIFY), stops its work,
demotes its pod and releases; the target claims first. Others may claim only once
the reservation has passed, so a target that dies meanwhile never leaves the lease
without a leader. Without --to the best live candidate by priority is chosen.

Exit codes: 0 the target leads; 1 refused (the lease is not held, or the target is
not a live candidate: the live ones are listed) or the target did not lead within
the reservation; 2 bad usage. The forced 'pglease release' stays for a leader that
does not answer.

Flags:
${optionHelp([...OPTIONS, ...databaseHelp()])}

Examples:
  pglease handover orders-sync --to orders-7d9f-abcde
  pglease handover orders-sync            # to the best live candidate
`;

export async function handoverCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const request: HandoverRequest = { reservationMs: DEFAULT_RESERVATION_MS };
  const command = await openDatabaseCommand(OPTIONS, argv, env, (raw, problems) => {
    // A misspelt flag may have been taken to carry the name: it is the one problem then.
    if (raw.positionals.length !== 1 && raw.misspelt.size === 0) {
      problems.push(
        `pglease handover takes exactly one lease name, got ${raw.positionals.length}: pglease handover orders-sync --to POD`,
      );
    }
    const to = raw.values.get("to")?.text;
    if (to !== undefined) {
      if (to === "") problems.push("--to needs a pod name or a holder: see pglease candidates KEY");
      else request.to = to;
    }
    const reservation = raw.values.get("reservation")?.text;
    if (reservation !== undefined) {
      const parsed = parseDuration(reservation);
      if ("problem" in parsed) problems.push(`--reservation: ${parsed.problem}`);
      else request.reservationMs = parsed.value;
    }
  });
  const key = command.raw.positionals[0] ?? "";
  const json = command.raw.values.get("json")?.text === "true";
  try {
    const stores = {
      handovers: new HandoverStore(command.pool, command.store.table, 10_000),
      candidates: new CandidateStore(command.pool, command.store.table, 10_000),
    };
    const done = await handOver(stores, key, request);
    const tookMs = Math.round(done.tookMs ?? 0);
    process.stdout.write(
      json
        ? `${JSON.stringify({ key, from: done.from, to: done.to.holder, pod: done.to.pod, fence: done.fence, tookMs })}\n`
        : `handed lease ${key} over from ${done.from} to ${done.to.holder} (pod ${done.to.pod}): it leads with fence ${done.fence}, ${tookMs} ms after the request\n`,
    );
    return 0;
  } catch (error) {
    if (!(error instanceof HandoverRefused || error instanceof HandoverNotTaken)) throw error;
    process.stderr.write(`pglease handover: ${error.message}\n`);
    return 1;
  } finally {
    await command.close();
  }
}
