export {
  type EmbeddedServer,
  freePort,
  startEmbeddedPostgres,
} from "../../src/cli/demo/embedded-postgres.ts";
