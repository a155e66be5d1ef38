import { describe, expect, it } from "vitest";
import { parseDownwardApiMap, unquoteGoString } from "../../src/fence/downward-api-format.ts";

describe("unquoteGoString (Go %q)", () => {
  it.each([
    ['"leader"', "leader"],
    ['""', ""],
    ['"a\\"b\\nc"', 'a"b\nc'],
    ['"\\a\\b\\f\\n\\r\\t\\v\\\\"', "\x07\b\f\n\r\t\v\\"],
    ['"é – 😀"', "é – 😀"],
    ['"\\u200b"', "\u200b"],
    ['"\\U0001f600"', "😀"],
    ['"\\x00\\x7f"', "\u0000\u007f"],
    ['"\\xc3\\xa9"', "é"],
    ['"\\101\\102"', "AB"],
  ])("reads %s", (quoted, expected) => {
    expect(unquoteGoString(quoted)).toBe(expected);
  });

  it("turns bytes that are not UTF-8 into U+FFFD, as nothing else fits a JavaScript string", () => {
    expect(unquoteGoString('"a\\xffb"')).toBe("a\ufffdb");
  });

  it.each(["leader", '"open', '"bad \\q"', '"short \\x4"', '"dangling \\"', '"in"side"', '"\\400"'])(
    "refuses %s",
    (quoted) => {
      expect(() => unquoteGoString(quoted)).toThrow(SyntaxError);
    },
  );
});

describe("parseDownwardApiMap", () => {
  it("reads a kubelet annotations file, values with = and escaped JSON included", () => {
    const text = [
      'kubectl.kubernetes.io/last-applied-configuration="{\\"apiVersion\\":\\"v1\\",\\"kind\\":\\"Pod\\"}\\n"',
      'kubernetes.io/config.seen="2026-11-30T09:59:00.000000000Z"',
      'note="a=b"',
      'pglease.io/fence="42"',
      'pglease.io/lease="orders-sync"',
    ].join("\n");
    const map = parseDownwardApiMap(text);
    expect(map.get("pglease.io/fence")).toBe("42");
    expect(map.get("pglease.io/lease")).toBe("orders-sync");
    expect(map.get("note")).toBe("a=b");
    expect(JSON.parse(map.get("kubectl.kubernetes.io/last-applied-configuration") ?? "")).toEqual({
      apiVersion: "v1",
      kind: "Pod",
    });
    expect(map.size).toBe(5);
  });

  it("reads an empty file as an empty map and names the line it cannot read", () => {
    expect(parseDownwardApiMap("").size).toBe(0);
    expect(() => parseDownwardApiMap('a="1"\nbroken')).toThrow(/line 2/);
    expect(() => parseDownwardApiMap('a="1"\nb=unquoted')).toThrow(/line 2/);
  });
});
