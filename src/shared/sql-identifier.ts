// A schema or table name that comes from configuration (the lease table, the fence guard's table)
// is spliced into SQL text, so it is held to a conservative identifier syntax before it is quoted;
// keys, holders, resources and fences never are: they travel as parameters.

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Null when `value` is a plain identifier; otherwise the problem, naming the field. */
export function identifierProblem(field: string, value: unknown): string | null {
  return typeof value === "string" && IDENTIFIER.test(value)
    ? null
    : `${field} must be a plain PostgreSQL identifier (letters, digits, underscore; not starting with a digit; at most 63 characters), got ${JSON.stringify(value)}`;
}
