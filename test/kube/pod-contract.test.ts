import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { fenceAnnotationValue, fenceFromAnnotation, POD_CONTRACT } from "../../src/shared/pod-contract.ts";

describe("the pod contract", () => {
  it("names what docs/pod-contract.md's table promises", async () => {
    expect(POD_CONTRACT).toEqual({
      roleLabel: "pglease.io/role",
      leaderValue: "leader",
      followerValue: "follower",
      fenceAnnotation: "pglease.io/fence",
      holderAnnotation: "pglease.io/holder",
      leaseAnnotation: "pglease.io/lease",
      leaderClusterAnnotation: "pglease.io/leader-cluster",
      conditionType: "pglease.io/leader",
      notCampaigningAnnotation: "pglease.io/not-campaigning",
      supersededAnnotation: "pglease.io/superseded-by",
    });
    const page = await readFile(new URL("../../docs/pod-contract.md", import.meta.url), "utf8");
    const table = page.split("\n").filter((line) => line.startsWith("| "));
    for (const name of Object.values(POD_CONTRACT)) {
      expect(
        table.some((row) => row.includes(`\`${name}\``)),
        `${name} in the table`,
      ).toBe(true);
    }
  });

  it("writes a fence in decimal and no fence as a removed annotation", () => {
    expect(fenceAnnotationValue(9_007_199_254_740_991)).toBe("9007199254740991");
    expect(fenceAnnotationValue(null)).toBeNull();
  });

  it("reads back what it writes, an absent or empty annotation as no fence", () => {
    expect(fenceFromAnnotation(fenceAnnotationValue(42), "f")).toBe(42);
    expect(fenceFromAnnotation(undefined, "f")).toBeNull();
    expect(fenceFromAnnotation("", "f")).toBeNull();
  });

  it.each(["0", "-3", "4.5", "9007199254740993", "forty-two"])("refuses %s, naming the field", (value) => {
    expect(() => fenceFromAnnotation(value, "annotation pglease.io/fence")).toThrow(
      /^annotation pglease.io\/fence: /,
    );
  });
});
