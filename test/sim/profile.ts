// What the code on this branch does, as model switches. The simulation, its CI batch and the
// differential test all start from here: when the lease statements or the pool change (the
// safety fixes), this changes with them, and model-vs-postgres.test.ts fails until it does.
import { CURRENT_SQL } from "./lease-statements.ts";
import type { SimOptions } from "./scenario.ts";

export const SHIPPED: Pick<SimOptions, "sem" | "serverTimeout"> = {
  sem: CURRENT_SQL,
  // src/lease/pool.ts sets no statement_timeout: only pg's client-side query_timeout.
  serverTimeout: false,
};
