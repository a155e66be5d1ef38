import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type DownwardApiReading,
  type DownwardApiWatch,
  LeadershipReadError,
  readDownwardApi,
  watchDownwardApi,
} from "../../src/fence/index.ts";
import { formatMap, type KubeletVolume, kubeletVolume, mapItems } from "./kubelet-volume.ts";

let dir: string;
let volume: KubeletVolume;
let watcher: DownwardApiWatch | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "pglease-podinfo-"));
  volume = kubeletVolume(dir);
});

afterEach(async () => {
  watcher?.close();
  watcher = undefined;
  await rm(dir, { recursive: true, force: true });
});

const leader = (fence: string) =>
  mapItems(
    { app: "web", "pglease.io/role": "leader" },
    { "pglease.io/fence": fence, "pglease.io/lease": "orders-sync", "pglease.io/holder": "web-7d9f-abc12" },
  );
const follower = () => mapItems({ "pglease.io/role": "follower" }, {});

describe("readDownwardApi", () => {
  it("reads role, fence and lease through the ..data symlinks", async () => {
    await volume.update(leader("41"));
    expect(await readDownwardApi(dir)).toEqual({
      role: "leader",
      lease: "orders-sync",
      fence: 41,
      source: "downward-api",
    });
  });

  it("reads a follower, and a pod not yet published, as followers", async () => {
    await volume.update(follower());
    expect(await readDownwardApi(dir)).toMatchObject({ role: "follower", fence: null, lease: null });
    await volume.update(mapItems({ app: "web" }, {}));
    expect(await readDownwardApi(dir)).toMatchObject({ role: "follower", fence: null });
  });

  it("honours custom label and annotation keys", async () => {
    await volume.update(mapItems({ "example.com/role": "leader" }, { "example.com/term": "7" }));
    expect(
      await readDownwardApi(dir, { roleLabel: "example.com/role", fenceAnnotation: "example.com/term" }),
    ).toMatchObject({ role: "leader", fence: 7 });
  });

  it("reads a plain folder without the atomic writer's layout", async () => {
    await writeFile(join(dir, "labels"), formatMap({ "pglease.io/role": "leader" }));
    await writeFile(join(dir, "annotations"), formatMap({ "pglease.io/fence": "3" }));
    expect(await readDownwardApi(dir)).toMatchObject({ role: "leader", fence: 3 });
  });

  it("refuses a fence that is not a positive integer", async () => {
    await volume.update(leader("forty-two"));
    await expect(readDownwardApi(dir)).rejects.toThrow(
      /annotation pglease.io\/fence: a fence is a positive whole number/,
    );
  });

  it("reads one key per file, as the pglease chart projects them", async () => {
    await volume.update({ role: "leader", fence: "41", lease: "orders-sync", holder: "web-7d9f-abc12" });
    expect(await readDownwardApi(dir)).toEqual({
      role: "leader",
      lease: "orders-sync",
      fence: 41,
      source: "downward-api",
    });
    // An absent label or annotation projected by key is an empty file.
    await volume.update({ role: "", fence: "", lease: "", holder: "" });
    expect(await readDownwardApi(dir)).toMatchObject({ role: "follower", fence: null, lease: null });
  });

  it("says how to mount the volume when the files are missing", async () => {
    const error = await readDownwardApi(dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeadershipReadError);
    expect((error as Error).message).toMatch(
      /holds no role label: neither a "labels" nor a "role" file. Mount a downwardAPI volume there .*metadata.labels\['pglease.io\/role'\]/,
    );
    await writeFile(join(dir, "role"), "leader");
    await expect(readDownwardApi(dir)).rejects.toThrow(/holds no fence annotation/);
  });
});

describe("watchDownwardApi", () => {
  function collect(): {
    readings: DownwardApiReading[];
    errors: Error[];
    next(fence: number | null): Promise<void>;
  } {
    const readings: DownwardApiReading[] = [];
    const errors: Error[] = [];
    let waiter: (() => void) | undefined;
    watcher = watchDownwardApi(dir, { debounceMs: 20, onError: (e) => errors.push(e) }, (reading) => {
      readings.push(reading);
      waiter?.();
    });
    return {
      readings,
      errors,
      // Bounded by a deadline, not a fixed sleep: resolves on the reading that satisfies it.
      next: (fence) =>
        new Promise<void>((resolve, reject) => {
          const deadline = setTimeout(() => {
            waiter = undefined;
            reject(new Error(`no reading with fence ${fence} within 5 s; got ${JSON.stringify(readings)}`));
          }, 5000);
          waiter = () => {
            if (readings.at(-1)?.fence !== fence) return;
            waiter = undefined;
            clearTimeout(deadline);
            resolve();
          };
          waiter();
        }),
    };
  }

  it("re-reads after the kubelet's symlink swap and reports the new fence", async () => {
    await volume.update(leader("41"));
    const seen = collect();
    await seen.next(41);
    await volume.update(leader("42"));
    await seen.next(42);
    await volume.update(follower());
    await seen.next(null);
    expect(seen.readings.map((r) => [r.role, r.fence])).toEqual([
      ["leader", 41],
      ["leader", 42],
      ["follower", null],
    ]);
    expect(seen.errors).toEqual([]);
  });

  it("follows the chart's one-key-per-file layout across swaps", async () => {
    await volume.update({ role: "leader", fence: "7", lease: "orders-sync" });
    const seen = collect();
    await seen.next(7);
    await volume.update({ role: "leader", fence: "8", lease: "orders-sync" });
    await seen.next(8);
  });

  it("reports an unreadable generation through onError and recovers on the next swap", async () => {
    await volume.update(leader("41"));
    const seen = collect();
    await seen.next(41);
    await volume.update(leader("not-a-number"));
    await expect.poll(() => seen.errors.length, { timeout: 5000 }).toBeGreaterThan(0);
    expect(seen.errors[0]).toBeInstanceOf(LeadershipReadError);
    await volume.update(leader("43"));
    await seen.next(43);
  });

  it("fails at once, naming the folder, when there is nothing to watch", () => {
    expect(() => watchDownwardApi(join(dir, "absent"), {}, () => {})).toThrow(/cannot watch .*absent/);
  });
});
