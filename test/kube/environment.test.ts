import { describe, expect, it } from "vitest";
import { decidePublishing, SERVICE_ACCOUNT_TOKEN } from "../../src/kube/environment.ts";

const inPod = { POD_NAME: "orders-0", POD_NAMESPACE: "shop" };
const tokenMounted = (path: string) => path === SERVICE_ACCOUNT_TOKEN;
const nothingMounted = () => false;

describe("deciding whether to publish", () => {
  it("is on inside a cluster with the downward API variables", () => {
    expect(decidePublishing({ ...inPod, KUBERNETES_SERVICE_HOST: "10.0.0.1" }, tokenMounted)).toEqual({
      enabled: true,
      namespace: "shop",
      podName: "orders-0",
      source: "in-cluster",
    });
  });

  it("is on with a kubeconfig outside a cluster", () => {
    expect(decidePublishing({ ...inPod, KUBECONFIG: "/home/me/.kube/config" }, nothingMounted)).toMatchObject(
      {
        enabled: true,
        source: "kubeconfig",
      },
    );
  });

  it("is off without the pod's name or namespace, naming what is missing", () => {
    const decision = decidePublishing(
      { KUBERNETES_SERVICE_HOST: "10.0.0.1", POD_NAMESPACE: "shop" },
      tokenMounted,
    );
    expect(decision).toEqual({ enabled: false, reason: expect.stringContaining("POD_NAME not set") });
    const neither = decidePublishing({}, tokenMounted);
    expect(neither).toEqual({
      enabled: false,
      reason: expect.stringContaining("POD_NAME and POD_NAMESPACE"),
    });
  });

  it("is off without a service account and without KUBECONFIG", () => {
    expect(decidePublishing({ ...inPod }, nothingMounted)).toEqual({
      enabled: false,
      reason: expect.stringContaining("no in-cluster service account"),
    });
    // A token alone is not enough: loadFromCluster() also needs the service address.
    expect(decidePublishing({ ...inPod }, tokenMounted)).toMatchObject({ enabled: false });
  });
});
