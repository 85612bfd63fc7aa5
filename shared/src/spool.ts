// Writing a DEL to the spool: temp file, fsync, rename, fsync of the dir, so the daemon never
// ingests a half-written request and a crash never loses a written one. The shim spools when the
// daemon is down; the daemon spools DELs itself when its journal is corrupt (daemon.ts), in the
// same format, so that one ingest path (daemon/src/engine/spool.ts ingestSpool) reads both.

import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

export function spoolRequest(dir: string, containerId: string, body: string): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const name = `${Date.now().toString().padStart(15, '0')}-${containerId.slice(0, 64)}-${randomBytes(4).toString('hex')}`;
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
