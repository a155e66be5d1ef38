// describe.each over the API servers of kube-servers.ts, for the Kubernetes suites:
//
//   await onEachKubeServer("publisher suite", (kube) => {
//     it("...", async () => { const server = await kube.start({ namespace: "shop" }); ... });
//   });
import { afterAll, describe, it } from "vitest";
import { type KubeServerKind, kubeServers } from "./kube-servers.ts";

/**
 * describe.each over the servers this machine has, titled "on the <name> API server", the shared
 * server released after it; when there is none, one skipped suite (vitest fails a file without any).
 */
export async function onEachKubeServer(suite: string, body: (kube: KubeServerKind) => void): Promise<void> {
  const kinds = await kubeServers(suite);
  if (kinds.length === 0) {
    describe.skip(suite, () => {
      it("needs helm to render the chart's Role (see the line above)", () => {});
    });
    return;
  }
  describe.each(kinds)("on the $name API server", (kube) => {
    // Registered first, so it runs after the suite's own afterAll hooks (they run in reverse).
    afterAll(() => kube.release());
    body(kube);
  });
}
