// --cluster-name: validated with the other flags of `pglease run`, carried in the holder identity
// so the table, the history and the logs say where the leader runs, read back without disturbing
// the restart proof appended after it.
import { describe, expect, it } from "vitest";
import { readRunConfig } from "../../src/config/run-config.ts";
import {
  holderCluster,
  holderIdentity,
  provenDeadPredecessor,
  restartProof,
  withRestartProof,
} from "../../src/election/identity.ts";
import { NO_DIAL_DATABASE, runConfigProblems } from "../support/processes/run-config.ts";

const db = NO_DIAL_DATABASE;
const problemsOf = runConfigProblems;

describe("--cluster-name", () => {
  it("is none by default, and read from the flag or PGLEASE_CLUSTER_NAME (the flag wins)", () => {
    expect(readRunConfig(["--lease", "a"], db).clusterName).toBeNull();
    expect(readRunConfig(["--lease", "a"], { ...db, PGLEASE_CLUSTER_NAME: "eu-west.1" }).clusterName).toBe(
      "eu-west.1",
    );
    expect(
      readRunConfig(["--lease", "a", "--cluster-name", "east"], { ...db, PGLEASE_CLUSTER_NAME: "west" })
        .clusterName,
    ).toBe("east");
  });

  it("must be a label value, reported with every other problem and naming the flag or variable", () => {
    const problems = problemsOf(["--lease", "a", "--duration", "nope"], {
      ...db,
      PGLEASE_CLUSTER_NAME: "us/east",
    });
    expect(problems).toHaveLength(2);
    expect(problems).toContainEqual(expect.stringMatching(/^--duration/));
    expect(problems).toContainEqual(
      expect.stringMatching(/^--cluster-name \(PGLEASE_CLUSTER_NAME\) "us\/east" .*a label value/),
    );
    expect(problemsOf(["--lease", "a", "--cluster-name", "x".repeat(64)], db)).toEqual([
      expect.stringMatching(/^--cluster-name "x{64}" .*63/),
    ]);
    expect(problemsOf(["--lease", "a", "--cluster-name", "-east"], db)).toHaveLength(1);
  });
});

describe("a holder identity with a cluster name", () => {
  it("starts with the cluster, which holderCluster reads back", () => {
    const holder = holderIdentity("orders-0", "east");
    expect(holder).toMatch(/^east\/orders-0-[0-9a-f]{8}$/);
    expect(holderCluster(holder)).toBe("east");
    expect(holderCluster(holderIdentity("orders-0"))).toBeNull();
    expect(holderCluster(null)).toBeNull();
    // A holder of someone else's making that only looks like one is not read as a cluster.
    expect(holderCluster("not a/cluster")).toBeNull();
  });

  it("keeps the restart proof working after it", () => {
    const lock = { token: "0123456789abcdef0123456789abcdef", boundAt: 5n };
    const earlier = withRestartProof(holderIdentity("orders-0", "east"), lock);
    const later = withRestartProof(holderIdentity("orders-0", "east"), { ...lock, boundAt: 9n });
    expect(holderCluster(later)).toBe("east");
    expect(restartProof(later)).toEqual({ token: lock.token, boundAt: 9n });
    expect(provenDeadPredecessor(later, earlier)).toBe(true);
  });
});
