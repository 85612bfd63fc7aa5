// Writing a DEL to the spool: temp file, fsync, rename, fsync of the dir, so the daemon never
// ingests a half-written request and a crash never loses a written one. The shim spools when the
// daemon is down; the daemon spools DELs itself when its journal is corrupt (routes/degraded.ts), in the
// same format, so that one ingest path (daemon/src/engine/spool.ts ingestSpool) reads both.
// No node:crypto import: the shim bundles this module, and loading node:crypto costs the
// Bun-compiled shim ~3.5 ms CPU per call (docs/performance.md, "The shim call"); the Web Crypto
// global gives the four random bytes without it.

import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';

function randomHex(bytes: number): string {
  return Array.from(globalThis.crypto.getRandomValues(new Uint8Array(bytes)), (b) =>
    b.toString(16).padStart(2, '0'),
  ).join('');
}

export function spoolRequest(dir: string, containerId: string, body: string): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const name = `${Date.now().toString().padStart(15, '0')}-${containerId.slice(0, 64)}-${randomHex(4)}`;
  const tmp = join(dir, `.${name}.tmp`);
  const final = join(dir, `${name}.json`);
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, body);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, final);
  const dfd = openSync(dir, 'r');
  try {
    fsyncSync(dfd);
  } finally {
    closeSync(dfd);
  }
  return final;
}
