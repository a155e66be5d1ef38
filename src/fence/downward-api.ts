// Reads leadership from a downward API volume: the pod's role label and fence annotation, projected
// as the `labels` and `annotations` files. The kubelet refreshes them on its sync loop, seconds to
// about a minute after the pod is patched, so a reading here can be that old. Environment variables
// from the downward API never update at all: do not use them for leadership.
//
// The kubelet updates the volume atomically: it writes a new `..<timestamp>` folder, points a
// `..data_tmp` symlink at it and renames that over `..data`; `labels` is itself a symlink to
// `..data/labels`. A watch on the file goes stale at the first swap (it follows the old inode),
// so the watcher here watches the folder.
import { type FSWatcher, watch } from "node:fs";
import { readFile, realpath } from "node:fs/promises";
import { join } from "node:path";
import { parseDownwardApiMap } from "./downward-api-format.ts";
import { LeadershipReadError, type LeadershipReading, parseFence } from "./leadership.ts";

export interface DownwardApiOptions {
  /** Default "pglease.io/role"; the value "leader" means leader. */
  roleLabel?: string;
  /** Default "pglease.io/fence". */
  fenceAnnotation?: string;
  /** Default "pglease.io/lease". */
  leaseAnnotation?: string;
  /** The volume item path of `metadata.labels`; default "labels". */
  labelsFile?: string;
  /** The volume item path of `metadata.annotations`; default "annotations". */
  annotationsFile?: string;
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

/** Reads role, fence and lease once, both files from the same generation of the volume. */
export async function readDownwardApi(
  dir: string,
  options: DownwardApiOptions = {},
): Promise<DownwardApiReading> {
  const labelsFile = options.labelsFile ?? "labels";
  const annotationsFile = options.annotationsFile ?? "annotations";
  const fenceKey = options.fenceAnnotation ?? "pglease.io/fence";
  for (let attempt = 1; ; attempt++) {
    // Reading through one resolved `..data` keeps labels and annotations from different swaps apart.
    const generation = await resolveGeneration(dir);
    const [labels, annotations] = await Promise.all([
      readMap(join(generation, labelsFile)),
      readMap(join(generation, annotationsFile)),
    ]);
    if (labels && annotations) {
      return {
        role: labels.get(options.roleLabel ?? "pglease.io/role") === "leader" ? "leader" : "follower",
        lease: annotations.get(options.leaseAnnotation ?? "pglease.io/lease") || null,
        fence: parseFence(SOURCE, `annotation ${fenceKey}`, annotations.get(fenceKey)),
        source: SOURCE,
      };
    }
    // The kubelet deletes the old generation right after a swap: resolve `..data` again and re-read.
    if (generation !== dir && attempt < SWAP_RETRIES) continue;
    throw new LeadershipReadError(
      SOURCE,
      `${dir} has no ${labels ? annotationsFile : labelsFile} file: mount a downwardAPI volume there with items ` +
        `{ path: "${labelsFile}", fieldRef: { fieldPath: metadata.labels } } and ` +
        `{ path: "${annotationsFile}", fieldRef: { fieldPath: metadata.annotations } }`,
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

/** The parsed file, or null when it does not exist. */
async function readMap(path: string): Promise<Map<string, string> | null> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if (isNotFound(error)) return null;
    throw new LeadershipReadError(SOURCE, `cannot read ${path}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  try {
    return parseDownwardApiMap(text);
  } catch (error) {
    throw new LeadershipReadError(SOURCE, `${path}: ${(error as Error).message}`, { cause: error });
  }
}

function isNotFound(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "ENOENT";
}
