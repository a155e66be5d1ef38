import { ApiException } from "@kubernetes/client-node";
import type { StatusBody } from "./status-errors.ts";

export interface Failure {
  code: number;
  status: StatusBody;
}

/**
 * Awaits a client-node call that must fail and returns the HTTP code with the parsed Status body.
 * client-node keeps a non-2xx body as text inside ApiException; tests want the object.
 */
export async function failureOf(call: Promise<unknown>): Promise<Failure> {
  try {
    await call;
  } catch (error) {
    if (!(error instanceof ApiException)) throw error;
    const body = typeof error.body === "string" ? JSON.parse(error.body) : error.body;
    return { code: error.code, status: body as StatusBody };
  }
  throw new Error("expected the call to fail, it succeeded");
}
