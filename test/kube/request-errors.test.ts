// How a refused request is classified and worded, from the Status bodies the API server sends
// (their wording is the server's: the authorizer's responsewriters.forbiddenMessage, the
// ValidatingAdmissionPolicy dispatcher's and a webhook's statuserror; publisher-rbac.test.ts
// meets the first two on the real kube-apiserver).
import { describe, expect, it } from "vitest";
import { KubeApiError } from "../../src/kube/client/connection.ts";
import { KubeRequestError, PERMISSIONS } from "../../src/kube/pod-api.ts";

function refused(status: number, message: string): KubeRequestError {
  return new KubeRequestError(PERMISSIONS.patchPod, new KubeApiError(status, { message }, ""));
}

describe("refusals", () => {
  it("tells the authorizer's 403 (RBAC) from admission's", () => {
    const rbac = refused(
      403,
      'pods "orders-0" is forbidden: User "system:serviceaccount:shop:orders" cannot patch resource "pods" in API group "" in the namespace "shop"',
    );
    expect(rbac.kind).toBe("forbidden");
    const policy = refused(
      403,
      "pods \"orders-0\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: not yours",
    );
    expect(policy.kind).toBe("denied");
    expect(policy.serverMessage).toBe(
      "pods \"orders-0\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: not yours",
    );
    // PodSecurity, a namespace being deleted: not RBAC either.
    expect(refused(403, 'pods "orders-0" is forbidden: violates PodSecurity "restricted:latest"').kind).toBe(
      "denied",
    );
  });

  it("takes a policy's 422 and a webhook's 400 for admission, and other 422s for what they are", () => {
    expect(
      refused(422, "pods \"orders-0\" is forbidden: ValidatingAdmissionPolicy 'p' denied request: not yours")
        .kind,
    ).toBe("denied");
    expect(refused(400, 'admission webhook "labels.example.com" denied the request: no').kind).toBe("denied");
    expect(refused(422, "the server rejected our request due to an error in our request").kind).toBe(
      "rejected",
    );
  });

  it("hides a password in a URL and a bearer token the server's message quotes", () => {
    const error = refused(
      403,
      'admission webhook "w" denied the request: annotation db=postgres://app:s3cret@db:5432/x, Authorization: Bearer abc.def, token eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl',
    );
    for (const text of [error.message, error.serverMessage ?? ""]) {
      expect(text).toContain("postgres://***@db:5432/x");
      expect(text).toContain("Bearer ***");
      expect(text).not.toMatch(/s3cret|abc\.def|eyJ/);
    }
  });
});
