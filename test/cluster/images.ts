// The images the cluster runs, built here by test/cluster/build-images.sh (buildah, no registry)
// and imported into the node's containerd, where the kubelet finds them (pull policy IfNotPresent).
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { paths } from "./layout.ts";
import type { ClusterTools } from "./tools.ts";

const run = promisify(execFile);
const script = join(import.meta.dirname, "build-images.sh");

export interface Image {
  name: string;
  /** What a pod spec names: localhost/pglease/NAME:TAG. */
  reference: string;
  archive: string;
  /** How long the build took (0 when the archive was cached). */
  buildMs: number;
}

export async function buildImage(name: "pause" | "labeller" | "pglease"): Promise<Image> {
  const started = performance.now();
  const { stdout } = await run("bash", [script, name], { maxBuffer: 16 * 1024 * 1024, timeout: 30 * 60_000 });
  const [, reference, archive] = stdout.trim().split("\n").pop()?.split(" ") ?? [];
  if (!reference || !archive) throw new Error(`build-images.sh ${name}: no image in its output: ${stdout}`);
  return { name, reference, archive, buildMs: Math.round(performance.now() - started) };
}

export const pauseImage = (_tools: ClusterTools) => buildImage("pause");

/** Into the k8s.io namespace, the one the CRI plugin serves to the kubelet. */
export async function importImage(tools: ClusterTools, image: Image): Promise<void> {
  await run(join(tools.dir, "ctr"), [
    "--address",
    paths.containerdSocket,
    "--namespace",
    "k8s.io",
    "images",
    "import",
    image.archive,
  ]);
}
