// The copy step of a base backup with PostgreSQL's low-level API (between pg_backup_start and
// pg_backup_stop, failover-pair.ts), for binaries without pg_basebackup. It leaves out what
// PostgreSQL's docs say a base backup may leave out.
import { copyFile, mkdir, readdir } from "node:fs/promises";
import { join } from "node:path";

// Copied only as empty folders: the server fills them at start (pg_wal from the primary's stream).
const EMPTY_IN_BACKUP = new Set([
  "pg_wal",
  "pg_replslot",
  "pg_stat_tmp",
  "pg_dynshmem",
  "pg_notify",
  "pg_serial",
  "pg_snapshots",
  "pg_subtrans",
]);
const NOT_IN_BACKUP = new Set(["postmaster.pid", "postmaster.opts", "standby.signal", "backup_label"]);

/** A running data directory; a file removed while it is copied is left out, as pg_basebackup does. */
export async function copyDataDirectory(from: string, to: string, top = true): Promise<void> {
  await mkdir(to, { mode: 0o700 });
  const entries = await readdir(from, { withFileTypes: true });
  await Promise.all(
    entries.map(async (entry) => {
      const [source, target] = [join(from, entry.name), join(to, entry.name)];
      if (top && NOT_IN_BACKUP.has(entry.name)) return;
      if (entry.isDirectory()) {
        if (top && EMPTY_IN_BACKUP.has(entry.name)) await mkdir(target, { mode: 0o700 });
        else await copyDataDirectory(source, target, false);
      } else if (entry.isFile()) {
        await copyFile(source, target).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== "ENOENT") throw error;
        });
      }
    }),
  );
}
