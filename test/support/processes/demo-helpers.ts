// The demo's pieces that the tests and the bench reuse, reached only through test/support.
export { FailoverTimer } from "../../../src/cli/demo/failover-timer.ts";
export { PGLEASE_ENTRY } from "../../../src/cli/demo/replicas.ts";
