import { describe, expect, it } from "vitest";
import {
  labelValueProblem,
  parseLabelSelector,
  qualifiedNameProblem,
} from "../../src/kube/kubernetes-syntax.ts";
import {
  defaultPeerSelector,
  PUBLISH_DEFAULTS,
  type PublishConfig,
  PublishConfigError,
  type PublishConfigInput,
  peerSelectorFor,
  validatePublishConfig,
} from "../../src/kube/publish-config.ts";

describe("publish config", () => {
  it("fills the documented defaults", () => {
    expect(validatePublishConfig({ namespace: "shop", podName: "orders-0" })).toEqual({
      config: { ...PUBLISH_DEFAULTS, namespace: "shop", podName: "orders-0" },
    });
    expect(PUBLISH_DEFAULTS).toMatchObject({
      roleLabel: "pglease.io/role",
      leaderValue: "leader",
      followerValue: "follower",
      fenceAnnotation: "pglease.io/fence",
      holderAnnotation: "pglease.io/holder",
      leaseAnnotation: "pglease.io/lease",
      conditionType: "pglease.io/leader",
      resyncIntervalMs: 300_000,
    });
  });

  it("reports every problem at once, each naming its field", () => {
    const result = validatePublishConfig({
      namespace: "Shop_1",
      roleLabel: "a/b/c",
      leaderValue: "-leader",
      followerValue: "",
      fenceAnnotation: "pglease.io/",
      holderAnnotation: "x".repeat(64),
      leaseAnnotation: "UPPER.case/lease",
      conditionType: "bad type",
      peerSelector: "app in (a,b",
      resyncIntervalMs: 0,
    });
    expect("problems" in result).toBe(true);
    const problems = "problems" in result ? result.problems : [];
    for (const field of [
      "namespace",
      "podName",
      "roleLabel",
      "leaderValue",
      "followerValue",
      "fenceAnnotation",
      "holderAnnotation",
      "leaseAnnotation",
      "conditionType",
      "peerSelector",
      "resyncIntervalMs",
    ]) {
      expect(
        problems.some((p) => p.startsWith(`${field} `)),
        `${field} in ${problems.join("\n")}`,
      ).toBe(true);
    }
  });

  it("names fields the way the caller asks", () => {
    const result = validatePublishConfig({ podName: "p" }, (field) => `--${field}`);
    expect(result).toEqual({ problems: [expect.stringMatching(/^--namespace is required/)] });
  });

  it("rejects a leader value equal to the follower value and shared annotation keys", () => {
    const result = validatePublishConfig({
      namespace: "shop",
      podName: "p",
      leaderValue: "same",
      followerValue: "same",
      holderAnnotation: "pglease.io/fence",
    });
    expect("problems" in result && result.problems).toEqual([
      expect.stringContaining("leaderValue and followerValue"),
      expect.stringContaining("fenceAnnotation and holderAnnotation"),
    ]);
  });

  it("rejects a peer selector on the role label", () => {
    const result = validatePublishConfig({
      namespace: "shop",
      podName: "p",
      peerSelector: "app=orders,pglease.io/role=leader",
    });
    expect("problems" in result && result.problems[0]).toMatch(/^peerSelector .*role label/);
  });

  it("accepts a valid peer selector", () => {
    const result = validatePublishConfig({
      namespace: "shop",
      podName: "p",
      peerSelector: "app=orders,tier!=db",
    });
    expect("config" in result && result.config.peerSelector).toBe("app=orders,tier!=db");
  });

  it("takes the pod's uid when given (POD_UID), null when not, and refuses an empty one", () => {
    const uid = "3f2c1a6e-0d4b-4c1e-9a7f-5b2d8e6c4a10";
    const given = validatePublishConfig({ namespace: "shop", podName: "p", podUid: uid });
    expect("config" in given && given.config.podUid).toBe(uid);
    expect(PUBLISH_DEFAULTS.podUid).toBeNull();
    expect(validatePublishConfig({ namespace: "shop", podName: "p", podUid: " " })).toEqual({
      problems: [`podUid " " must not be empty (the pod's uid, e.g. from POD_UID)`],
    });
  });
});

describe("peer selector default", () => {
  it("uses the pod's name and instance labels, whichever exist", () => {
    expect(
      defaultPeerSelector({
        "app.kubernetes.io/name": "orders",
        "app.kubernetes.io/instance": "prod",
        x: "y",
      }),
    ).toBe("app.kubernetes.io/name=orders,app.kubernetes.io/instance=prod");
    expect(defaultPeerSelector({ "app.kubernetes.io/instance": "prod" })).toBe(
      "app.kubernetes.io/instance=prod",
    );
    expect(defaultPeerSelector({ app: "orders" })).toBeNull();
    expect(defaultPeerSelector(undefined)).toBeNull();
  });
});

describe("peer selection", () => {
  const valid = (input: PublishConfigInput): PublishConfig => {
    const result = validatePublishConfig({ namespace: "shop", podName: "orders-0", ...input });
    if ("problems" in result) throw new Error(result.problems.join("; "));
    return result.config;
  };
  const appLabels = { "app.kubernetes.io/name": "orders" };

  it("uses the configured selector, whatever the pod's labels", () => {
    expect(peerSelectorFor(valid({ peerSelector: "app=orders" }), {})).toBe("app=orders");
  });

  it("builds one from the pod's labels when none is configured", () => {
    expect(valid({}).demotePeers).toBe(true);
    expect(peerSelectorFor(valid({}), appLabels)).toBe("app.kubernetes.io/name=orders");
  });

  it("is a configuration error, naming the field and both fixes, when there is nothing to build it from", () => {
    const attempt = () => peerSelectorFor(valid({}), { app: "orders" });
    expect(attempt).toThrow(PublishConfigError);
    expect(attempt).toThrow(
      /^peerSelector is not set .*orders-0.* set peerSelector to .*, or to null to opt out/,
    );
  });

  it("finds no peers, and raises nothing, once the operator opted out with null", () => {
    const config = valid({ peerSelector: null });
    expect(config).toMatchObject({ peerSelector: null, demotePeers: false });
    expect(peerSelectorFor(config, appLabels)).toBeNull();
    expect(peerSelectorFor(config, {})).toBeNull();
  });
});

describe("Kubernetes syntax", () => {
  it.each([
    ["pglease.io/role", true],
    ["role", true],
    ["a.b-c_d", true],
    ["example.com/Role.Name_1", true],
    ["Example.com/role", false],
    ["/role", false],
    ["a/b/c", false],
    ["-role", false],
    ["role-", false],
    [`x/${"a".repeat(63)}`, true],
    [`x/${"a".repeat(64)}`, false],
    [`${"a".repeat(254)}/x`, false],
    ["", false],
  ])("qualified name %s valid: %s", (value, valid) => {
    expect(qualifiedNameProblem(value) === null).toBe(valid);
  });

  it.each([
    ["", true],
    ["leader", true],
    ["Leader_1.x-y", true],
    ["-x", false],
    ["x y", false],
    ["a".repeat(63), true],
    ["a".repeat(64), false],
  ])("label value %s valid: %s", (value, valid) => {
    expect(labelValueProblem(value) === null).toBe(valid);
  });

  it("parses the selector forms the API accepts", () => {
    expect(parseLabelSelector("a=b, c==d,e!=f,g,!h,i in (x, y),j notin (z),k>3")).toEqual({
      requirements: [
        { key: "a", operator: "=", values: ["b"] },
        { key: "c", operator: "=", values: ["d"] },
        { key: "e", operator: "!=", values: ["f"] },
        { key: "g", operator: "exists", values: [] },
        { key: "h", operator: "not-exists", values: [] },
        { key: "i", operator: "in", values: ["x", "y"] },
        { key: "j", operator: "notin", values: ["z"] },
        { key: "k", operator: ">", values: ["3"] },
      ],
    });
  });

  it.each(["a=b,", "a=b c", "a in (x", "k>x", "a/b/c=d", "=x"])("rejects the selector %s", (selector) => {
    expect(parseLabelSelector(selector)).toHaveProperty("problem");
  });
});
