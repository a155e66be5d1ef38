// How a refused request is classified and worded, from the Status bodies the API server sends
// (their wording is the server's: the authorizer's responsewriters.forbiddenMessage, the
// ValidatingAdmissionPolicy dispatcher's and a webhook's statuserror; publisher-rbac.test.ts
// meets the first two on the real kube-apiserver).
import { describe, expect, it } from "vitest";
import { KubeApiError } from "../../src/kube/client/connection.ts";
import { KubeRequestError, PERMISSIONS } from "../../src/kube/pod-api.ts";
import { validatePublishConfig } from "../../src/kube/publish-config.ts";
import { failureLog } from "../../src/kube/publish-failures.ts";
import { createLogger } from "../../src/observability/logger.ts";

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

  it("takes a webhook's 403 for admission even when it quotes the authorizer's words", () => {
    const webhook = refused(
      403,
      'admission webhook "hours.example.com" denied the request: User "system:serviceaccount:shop:orders" cannot patch resource "pods" outside business hours',
    );
    expect(webhook.kind).toBe("denied");
    const policy = refused(
      403,
      "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: User \"system:serviceaccount:shop:orders\" cannot patch resource \"pods\" here",
    );
    expect(policy.kind).toBe("denied");
  });

  it("does not call a 403 without a Status (a proxy's) an admission refusal", () => {
    const error = new KubeRequestError(
      PERMISSIONS.patchPod,
      new KubeApiError(403, undefined, "<html>Forbidden</html>"),
    );
    expect(error.kind).toBe("refused");
    const lines = logOf(error);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("the API server or a proxy in front of it");
    expect(lines[0]).toContain("check the Role bound to this pod's service account and any admission policy");
    expect(lines[0]).not.toContain("RBAC allows it");
  });
});

const SECRET = "s3cret";

describe("credentials in a server's message", () => {
  // What an admission message may quote (a policy's messageExpression, a webhook's text).
  it.each([
    ["a URL password with an unencoded /", "postgres://app:s3/cret@db/x", ["s3/cret", "cret"]],
    ["a URL password with an unencoded @", "postgres://app:p@ss3cret@db/x", ["ss3cret"]],
    ["a libpq keyword connection string", `host=db user=app password=${SECRET} dbname=x`, [SECRET]],
    ["a quoted libpq password", `host=db password='${SECRET} x' dbname=x`, [SECRET]],
    ["an env var the webhook echoes", `{"name":"DB_PASSWORD","value":"${SECRET}"}`, [SECRET]],
    [
      "the same JSON escaped in a quoted string",
      `"{\\"name\\":\\"DB\\",\\"value\\":\\"${SECRET}\\"}"`,
      [SECRET],
    ],
    ["a Secret's data", 'data: {"password":"czNjcmV0"}', ["czNjcmV0"]],
    ["a Secret's data under any key", '"data":{"DATABASE_URL":"cG9zdGdyZXM6"}', ["cG9zdGdyZXM6"]],
    ["a YAML key: value", `dbPassword: ${SECRET}`, [SECRET]],
    ["Basic auth", "Authorization: Basic YXBwOnMzY3JldA==", ["YXBwOnMzY3JldA=="]],
    ["a non-JWT bearer token", `Bearer ${SECRET}.x`, [SECRET]],
    ["a token in a query string", `https://hooks.example.com/x?token=${SECRET}`, [SECRET]],
    ["an access_token after &", `https://hooks.example.com/x?a=1&access_token=${SECRET}`, [SECRET]],
    ["a bootstrap token", "token abcdef.0123456789abcdef", ["0123456789abcdef"]],
  ])("hides %s in error.message and serverMessage", (_what, quote, secrets) => {
    const error = refused(403, `admission webhook "w" denied the request: ${quote}`);
    for (const text of [error.message, error.serverMessage ?? ""]) {
      for (const secret of secrets) expect(text).not.toContain(secret);
      expect(text).toContain("***");
    }
  });

  it("keeps the words around a credential", () => {
    const error = refused(
      403,
      `admission webhook "w" denied the request: host=db password=${SECRET} dbname=x; see https://docs.example.com/a@b`,
    );
    expect(error.serverMessage).toBe(
      'admission webhook "w" denied the request: host=db password=*** dbname=x; see https://***@b',
    );
  });

  it("hides before it cuts a non-JSON body at 200 characters", () => {
    const text = `${"x".repeat(170)} postgres://app:hunter2hunter2@db/x`;
    const error = new KubeRequestError(PERMISSIONS.patchPod, new KubeApiError(403, undefined, text));
    expect(error.message).not.toMatch(/hunter2/);
    expect(error.message.length).toBeLessThan(300);
  });
});

function logOf(error: KubeRequestError): string[] {
  const lines: string[] = [];
  const logger = createLogger("debug", [], { write: (line) => lines.push(JSON.parse(line).msg) });
  const result = validatePublishConfig({ namespace: "shop", podName: "orders-0" });
  if ("problems" in result) throw new Error(result.problems.join("; "));
  failureLog(logger, result.config).failed(error, 1);
  return lines;
}
