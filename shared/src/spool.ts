// Writing a DEL to the spool: temp file, fsync, rename, fsync of the dir, so the daemon never
// ingests a half-written request and a crash never loses a written one. The daemon spools DELs
// itself with this writer when its journal is corrupt (routes/degraded.ts); the shim (Go,
// shim/spool.go) spools when the daemon is down, in the same format, so that one ingest path
// (daemon/src/engine/spool.ts ingestSpool) reads both. The format is described once, in
// shared/vectors/spool.json; both writers and SPOOL_NAME are tested against it.
// (No node:crypto and a lazily loaded node:fs: this module was bundled into the former TypeScript
// shim, where each import cost a share of every call.)

/**
 * A spool file's name: <ms since the epoch, 15 digits>-<container id>-<8 hex digits>.json
 * (shared/vectors/spool.json namePattern); the ingest reads only these.
 */
export const SPOOL_NAME = /^(\d{15})-(.+)-[0-9a-f]{8}\.json$/;

/**
 * A spool file's temp name while it is written (shared/vectors/spool.json tempPattern): the ingest
 * never reads it; one a writer killed mid-write left behind is removed once stale (daemon/src/spool-dirs.ts).
 */
export const SPOOL_TEMP_NAME = /^\.(\d{15})-(.+)-[0-9a-f]{8}\.tmp$/;

function randomHex(bytes: number): string {
  return Array.from(globalThis.crypto.getRandomValues(new Uint8Array(bytes)), (b) =>
    b.toString(16).padStart(2, '0'),
  ).join('');
}

/**
 * mkdir -p, one level at a time. Not mkdirSync's `recursive`: Node's loops forever when a level
 * answers ENOENT although its parent exists (a spoolDir under /proc or /sys), and the netconf names
 * the spool dir, so a hostile one would hang the shim past every bound.
 */
function makeDirs(dir: string, mkdirSync: (p: string, o: { mode: number }) => void): void {
  const parts = dir.split('/');
  for (let i = 1; i <= parts.length; i++) {
    const p = parts.slice(0, i).join('/');
    if (p === '' || parts[i - 1] === '' || parts[i - 1] === '.') continue;
    try {
      mkdirSync(p, { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
}

/**
 * Writes all of `bytes`: write(2) may take only part of them (a nearly full disk answers with a
 * short count, not an error), and a spool file cut short is a DEL lost.
 */
function writeAll(fd: number, bytes: Uint8Array, writeSync: (fd: number, b: Uint8Array) => number): void {
  for (let off = 0; off < bytes.length;) {
    const n = writeSync(fd, bytes.subarray(off));
    if (n <= 0) throw new Error(`spool file write made no progress at byte ${off} of ${bytes.length}`);
    off += n;
  }
}

export function spoolRequest(dir: string, containerId: string, body: string): string {
  const { closeSync, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync, writeSync } =
    process.getBuiltinModule('node:fs');
  const { join } = process.getBuiltinModule('node:path');
  makeDirs(dir, mkdirSync);
  const name = `${Date.now().toString().padStart(15, '0')}-${containerId.slice(0, 64)}-${randomHex(4)}`;
  const tmp = join(dir, `.${name}.tmp`);
  const final = join(dir, `${name}.json`);
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    try {
      writeAll(fd, new TextEncoder().encode(body), writeSync);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, final);
  } catch (e) {
    // Nothing half-written stays behind: the ingest reads only *.json, so a temp file would never go.
    try {
      unlinkSync(tmp);
    } catch {
      /* not there */
    }
    throw e;
  }
  const dfd = openSync(dir, 'r');
  try {
    fsyncSync(dfd);
  } finally {
    closeSync(dfd);
  }
  return final;
}
