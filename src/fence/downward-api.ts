// Reads leadership from a downward API volume: the pod's role label and fence annotation, projected
// either as whole maps (`labels`, `annotations`: `key="value"` lines) or one key per file (`role`,
// `fence`, `lease`: the raw value, as the pglease chart mounts them). The kubelet refreshes them on
// its sync loop, seconds to about a minute after the pod is patched, so a reading here can be that
// old. Environment variables from the downward API never update at all: do not use them for leadership.
//
// The kubelet updates the volume atomically: it writes a new `..<timestamp>` folder, points a
// `..data_tmp` symlink at it and renames that over `..data`; `labels` is itself a symlink to
// `..data/labels`. A watch on the file goes stale at the first swap (it follows the old inode),
// so the watcher here watches the folder.
import type { FSWatcher } from "node:fs";
import { join } from "node:path";
import { fenceFromAnnotation, POD_CONTRACT, ROLE } from "../shared/pod-contract.ts";
import { parseDownwardApiMap } from "./downward-api-format.ts";
import { LeadershipReadError, type LeadershipReading, readFence } from "./leadership.ts";

// The callback forms, promisified: node:fs/promises loads readline and the file watchers with it,
// memory the sidecar keeps for its whole life (issue 30; test/cli/module-graph.test.ts).
const { readFile: readFileCallback, realpath: realpathCallback, watch } = process.getBuiltinModule("node:fs");
const { promisify } = process.getBuiltinModule("node:util");
const readFile = promisify(readFileCallback);
const realpath = promisify(realpathCallback);

export interface DownwardApiOptions {
  /** Default POD_CONTRACT.roleLabel ("pglease.io/role"); the value "leader" means leader. */
  roleLabel?: string;
  /** Default POD_CONTRACT.fenceAnnotation ("pglease.io/fence"). */
  fenceAnnotation?: string;
  /** Default POD_CONTRACT.leaseAnnotation ("pglease.io/lease"). */
  leaseAnnotation?: string;
  /** The volume item path of `metadata.labels`; default "labels". Preferred over `roleFile` when present. */
  labelsFile?: string;
  /** The volume item path of `metadata.annotations`; default "annotations". Preferred over the single files. */
  annotationsFile?: string;
  /** The item path of `metadata.labels['<roleLabel>']`; default "role". */
  roleFile?: string;
  /** The item path of `metadata.annotations['<fenceAnnotation>']`; default "fence". */
  fenceFile?: string;
  /** The item path of `metadata.annotations['<leaseAnnotation>']`; default "lease". */
  leaseFile?: string;
}

export interface DownwardApiWatchOptions extends DownwardApiOptions {
  /** Quiet time after the last file event before re-reading; default 100 ms (one swap is several events). */
  debounceMs?: number;
  /** Read and watch failures; default: a process warning. The last good reading stays in force. */
  onError?: (error: Error) => void;
}

export type DownwardApiReading = LeadershipReading & { source: "downward-api" };

export interface DownwardApiWatch {
  close(): void;
}

const SOURCE = "downward-api";
const SWAP_RETRIES = 3;

/** Reads role, fence and lease once, every file from the same generation of the volume. */
export async function readDownwardApi(
  dir: string,
  options: DownwardApiOptions = {},
): Promise<DownwardApiReading> {
  const keys = {
    role: options.roleLabel ?? POD_CONTRACT.roleLabel,
    fence: options.fenceAnnotation ?? POD_CONTRACT.fenceAnnotation,
    lease: options.leaseAnnotation ?? POD_CONTRACT.leaseAnnotation,
  };
  const files = {
    labels: options.labelsFile ?? "labels",
    annotations: options.annotationsFile ?? "annotations",
    role: options.roleFile ?? "role",
    fence: options.fenceFile ?? "fence",
    lease: options.leaseFile ?? "lease",
  };
  for (let attempt = 1; ; attempt++) {
    // Reading through one resolved `..data` keeps files from different swaps apart.
    const generation = await resolveGeneration(dir);
    const at = (file: string) => join(generation, file);
    const [labels, annotations, role, fence, lease] = await Promise.all([
      readMap(at(files.labels)),
      readMap(at(files.annotations)),
      readValue(at(files.role)),
      readValue(at(files.fence)),
      readValue(at(files.lease)),
    ]);
    // A key absent from a map reads as undefined; an absent label projected as its own file is an empty file.
    const roleValue = labels ? labels.get(keys.role) : role;
    const fenceValue = annotations ? annotations.get(keys.fence) : fence;
    const leaseValue = annotations ? annotations.get(keys.lease) : lease;
    if (roleValue !== null && fenceValue !== null) {
      return {
        role: roleValue === POD_CONTRACT.leaderValue ? ROLE.leader : ROLE.follower,
        lease: leaseValue || null,
        fence: readFence(SOURCE, () => fenceFromAnnotation(fenceValue, `annotation ${keys.fence}`)),
        source: SOURCE,
      };
    }
    // The kubelet deletes the old generation right after a swap: resolve `..data` again and re-read.
    if (generation !== dir && attempt < SWAP_RETRIES) continue;
    const [missing, mapFile, mapField, itemFile, itemField] =
      roleValue === null
        ? ["role label", files.labels, "metadata.labels", files.role, `metadata.labels['${keys.role}']`]
        : [
            "fence annotation",
            files.annotations,
            "metadata.annotations",
            files.fence,
            `metadata.annotations['${keys.fence}']`,
          ];
    throw new LeadershipReadError(
      SOURCE,
      `${dir} holds no ${missing}: neither a ${JSON.stringify(mapFile)} nor a ${JSON.stringify(itemFile)} file. ` +
        `Mount a downwardAPI volume there with the item { path: ${itemFile}, fieldRef: { fieldPath: ${itemField} } } ` +
        `(or { path: ${mapFile}, fieldRef: { fieldPath: ${mapField} } })`,
    );
  }
}

/** Calls `onChange` with the first reading and after every change, re-reading when the folder changes. */
export function watchDownwardApi(
  dir: string,
  options: DownwardApiWatchOptions,
  onChange: (reading: DownwardApiReading) => void,
): DownwardApiWatch {
  const debounceMs = options.debounceMs ?? 100;
  const report = options.onError ?? ((error: Error) => process.emitWarning(error));
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let lastSeen: string | undefined;
  let reading = false;
  let readAgain = false;

  async function refresh(): Promise<void> {
    if (reading) {
      readAgain = true;
      return;
    }
    reading = true;
    try {
      do {
        readAgain = false;
        try {
          const current = await readDownwardApi(dir, options);
          const seen = JSON.stringify(current);
          if (!closed && seen !== lastSeen) {
            lastSeen = seen;
            onChange(current);
          }
        } catch (error) {
          if (!closed) report(error as Error);
        }
      } while (readAgain && !closed);
    } finally {
      reading = false;
    }
  }

  let watcher: FSWatcher;
  try {
    watcher = watch(dir, () => {
      if (closed) return;
      clearTimeout(timer);
      timer = setTimeout(refresh, debounceMs);
    });
  } catch (error) {
    throw new LeadershipReadError(SOURCE, `cannot watch ${dir}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  watcher.on("error", (error) => {
    if (!closed)
      report(new LeadershipReadError(SOURCE, `watching ${dir} failed: ${error.message}`, { cause: error }));
  });
  void refresh();

  return {
    close() {
      closed = true;
      clearTimeout(timer);
      watcher.close();
    },
  };
}

async function resolveGeneration(dir: string): Promise<string> {
  try {
    return await realpath(join(dir, "..data"));
  } catch (error) {
    // A plain folder (no kubelet atomic writer) is read as it is.
    if (isNotFound(error)) return dir;
    throw error;
  }
}

/** A one-key item: the raw value (trimmed), or null when the file does not exist. */
async function readValue(path: string): Promise<string | null> {
  const text = await readText(path);
  return text === null ? null : text.trim();
}

/** A whole-map item, parsed, or null when the file does not exist. */
async function readMap(path: string): Promise<Map<string, string> | null> {
  const text = await readText(path);
  if (text === null) return null;
  try {
    return parseDownwardApiMap(text);
  } catch (error) {
    throw new LeadershipReadError(SOURCE, `${path}: ${(error as Error).message}`, { cause: error });
  }
}

async function readText(path: string): Promise<string | null> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    if (isNotFound(error)) return null;
    throw new LeadershipReadError(SOURCE, `cannot read ${path}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

function isNotFound(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "ENOENT";
}
