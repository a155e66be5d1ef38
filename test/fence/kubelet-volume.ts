// A downward API volume laid out and updated the way the kubelet's atomic writer does it: each
// update is a new `..<timestamp>` folder, a `..data_tmp` symlink to it renamed over `..data`, then
// the old folder removed; each visible item is a symlink into `..data`.
import { mkdir, rename, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface KubeletVolume {
  /** Item path to content; the first update fixes the set of items. */
  update(items: Record<string, string>): Promise<void>;
}

/** The kubelet's format of a whole map: sorted `key=%q` lines. JSON quoting equals %q for these values. */
export function formatMap(map: Record<string, string>): string {
  return Object.keys(map)
    .sort()
    .map((key) => `${key}=${JSON.stringify(map[key])}`)
    .join("\n");
}

/** Whole-map items, as `fieldPath: metadata.labels` and `metadata.annotations` write them. */
export function mapItems(
  labels: Record<string, string>,
  annotations: Record<string, string>,
): Record<string, string> {
  return { labels: formatMap(labels), annotations: formatMap(annotations) };
}

export function kubeletVolume(dir: string): KubeletVolume {
  let generation = 0;
  let current: string | undefined;
  return {
    async update(items) {
      generation += 1;
      const n = String(generation);
      const name = `..2026_11_30_10_00_${n.padStart(2, "0")}.${n.padStart(9, "0")}`;
      await mkdir(join(dir, name));
      for (const [path, content] of Object.entries(items)) await writeFile(join(dir, name, path), content);
      await symlink(name, join(dir, "..data_tmp"));
      await rename(join(dir, "..data_tmp"), join(dir, "..data"));
      if (current === undefined) {
        for (const path of Object.keys(items)) await symlink(`..data/${path}`, join(dir, path));
      } else {
        await rm(join(dir, current), { recursive: true });
      }
      current = name;
    },
  };
}
