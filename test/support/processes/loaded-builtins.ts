// Preloaded (node --import) into a `pglease run` under test: when the process exits, writes the
// built-in modules it loaded (process.moduleLoadList, which @types/node does not declare) as JSON
// to the file named by PGLEASE_TEST_LOADED_BUILTINS. It loads none itself: node:fs is loaded
// before any user code.
const out = process.env.PGLEASE_TEST_LOADED_BUILTINS;
if (out) {
  const { writeFileSync } = process.getBuiltinModule("node:fs");
  const { moduleLoadList } = process as unknown as { moduleLoadList: string[] };
  process.on("exit", () => writeFileSync(out, JSON.stringify(moduleLoadList)));
}
