// A downward API volume laid out and updated the way the kubelet's atomic writer does it: each
// update is a new `..<timestamp>` folder, a `..data_tmp` symlink to it renamed over `..data`, then
// the old folder removed; the visible files are symlinks into `..data`.
import { mkdir, rename, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface KubeletVolume {
  update(files: { labels: Record<string, string>; annotations: Record<string, string> }): Promise<void>;
}

/** The kubelet's format: sorted `key=%q` lines, no trailing newline. JSON quoting equals %q for these values. */
export function formatMap(map: Record<string, string>): string {
  return Object.keys(map)
    .sort()
    .map((key) => `${key}=${JSON.stringify(map[key])}`)
    .join("\n");
}

export function kubeletVolume(dir: string): KubeletVolume {
  let generation = 0;
  let current: string | undefined;
  return {
    async update(files) {
      generation += 1;
      const name = `..2026_11_30_10_00_${String(generation).padStart(2, "0")}.${String(generation).padStart(9, "0")}`;
      await mkdir(join(dir, name));
      await writeFile(join(dir, name, "labels"), formatMap(files.labels));
      await writeFile(join(dir, name, "annotations"), formatMap(files.annotations));
      await symlink(name, join(dir, "..data_tmp"));
      await rename(join(dir, "..data_tmp"), join(dir, "..data"));
      if (current === undefined) {
        await symlink("..data/labels", join(dir, "labels"));
        await symlink("..data/annotations", join(dir, "annotations"));
      } else {
        await rm(join(dir, current), { recursive: true });
      }
      current = name;
    },
  };
}
