// The fencing token's one parser. The store reads it from a BIGINT column (as text), the guard
// from its own row, the readers from /status JSON and the pod annotation: all of them must agree
// on what a fence is, so they all come here.

/** Null when `value` is a valid fence (a positive safe integer, or its decimal string); else the problem. */
export function fenceProblem(value: unknown): string | null {
  const fence = typeof value === "string" && /^[0-9]+$/.test(value) ? Number(value) : value;
  if (typeof fence === "number" && Number.isSafeInteger(fence) && fence > 0) return null;
  if (typeof value === "string" && /^[0-9]+$/.test(value))
    return `${value} is beyond 2^53 (or zero) and cannot be a fence`;
  return `a fence is a positive whole number, got ${JSON.stringify(value)}`;
}

/** Parses a fence from any of its wire forms; throws a RangeError naming `field` when it is not one. */
export function parseFence(value: unknown, field = "fence"): number {
  const problem = fenceProblem(value);
  if (problem !== null) throw new RangeError(`${field}: ${problem}`);
  return Number(value);
}
