// What pglease_build_info and `pglease --version` report.

/**
 * The version in the package's own package.json, found by walking up from this module: it sits
 * two levels up in a source checkout (src/observability) and three in the built package.
 */
export async function packageVersion(): Promise<string> {
  // Not node:fs/promises, which loads readline and the file watchers (fence/downward-api.ts says why).
  const readFile = process
    .getBuiltinModule("node:util")
    .promisify(process.getBuiltinModule("node:fs").readFile);
  for (let dir = new URL("./", import.meta.url); ; dir = new URL("../", dir)) {
    const text = await readFile(new URL("package.json", dir), "utf8").catch(() => null);
    const pkg = text === null ? null : (JSON.parse(text) as { name?: string; version?: string });
    if (pkg?.name === "pglease" && pkg.version) return pkg.version;
    if (new URL("../", dir).href === dir.href) return "unknown (no package.json found)";
  }
}
