// One figure of a results document, named by a path into its groups, so that targets and the
// generated docs can say where each number comes from, as data:
//   peers.series[event=crash][system=pglease].expiryToClaim.p99Ms
// A segment is a key, optionally followed by conditions [key=value]…: the first array element
// whose fields match them all (compared as text). Anything missing on the way gives undefined:
// "not measured".

const SEGMENT = /^([^[\]]+)((?:\[[^\]]+\])*)$/;

function select(items: unknown, selectors: string, path: string): unknown {
  if (!Array.isArray(items)) return undefined;
  const conditions = selectors
    .slice(1, -1)
    .split("][")
    .map((pair) => {
      const at = pair.indexOf("=");
      if (at <= 0) throw new Error(`figure path ${path}: "[${pair}]" is not [key=value]`);
      return [pair.slice(0, at), pair.slice(at + 1)] as const;
    });
  return items.find(
    (item: unknown) =>
      typeof item === "object" &&
      item !== null &&
      conditions.every(([key, value]) => String((item as Record<string, unknown>)[key]) === value),
  );
}

/** The value at `path` in `groups`, or undefined where the path leads nowhere. */
export function figureAt(groups: Record<string, unknown>, path: string): unknown {
  let here: unknown = groups;
  for (const segment of path.split(".")) {
    const match = SEGMENT.exec(segment);
    if (!match?.[1]) throw new Error(`figure path ${path}: bad segment "${segment}"`);
    if (typeof here !== "object" || here === null) return undefined;
    here = (here as Record<string, unknown>)[match[1]];
    if (match[2]) here = select(here, match[2], path);
  }
  return here ?? undefined;
}

/** A finite number at `path`, or undefined. */
export function numberAt(groups: Record<string, unknown>, path: string): number | undefined {
  const value = figureAt(groups, path);
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}
