// What the sidecar's parts log through: the kube adapters below and the sidecar above take this
// interface; src/observability/logger.ts writes it as JSON lines.

/** Fields first and message second (the order pino took them); or a bare message. */
export interface LogFn {
  (message: string): void;
  (fields: object, message?: string): void;
}

export interface Logger {
  fatal: LogFn;
  error: LogFn;
  warn: LogFn;
  info: LogFn;
  debug: LogFn;
  trace: LogFn;
  /** A logger whose lines carry these fields after `service`, before each call's own. */
  child(bindings: object): Logger;
}
