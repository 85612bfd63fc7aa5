// The install record, <state-dir>/install.json: what install put on the node and the sha256 of
// each file, so uninstall removes exactly that and nothing someone else has since rewritten.

import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { atomicWrite, removeDurably } from './files.js';

export const RECORD_FILE = 'install.json';

export interface InstalledFile {
  path: string;
  sha256: string;
}

export interface InstallRecord {
  version: 1;
  /** "uninstalling" while uninstall removes files, so a running watcher stops rewriting them. */
  state: 'installed' | 'uninstalling';
  cniBinDir: string;
  cniConfDir: string;
  socket: string;
  spoolDir: string;
  shim: InstalledFile;
  /** Absent until a primary network config exists. */
  conflist?: InstalledFile & { primary: string };
}

export function recordPath(stateDir: string): string {
  return join(stateDir, RECORD_FILE);
}

export function readRecord(stateDir: string): InstallRecord | undefined {
  let text: string;
  try {
    text = readFileSync(recordPath(stateDir), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  const rec = JSON.parse(text) as InstallRecord;
  if (rec.version !== 1) throw new Error(`${recordPath(stateDir)} has unknown version ${String(rec.version)}`);
  return rec;
}

/** Writes the record only when it changed, so a repeated install leaves the file untouched. */
export function writeRecord(stateDir: string, rec: InstallRecord): void {
  const text = `${JSON.stringify(rec, null, 2)}\n`;
  let old: string | undefined;
  try {
    old = readFileSync(recordPath(stateDir), 'utf8');
  } catch {
    old = undefined;
  }
  if (old === text) return;
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  atomicWrite(recordPath(stateDir), text, 0o600);
}

export function removeRecord(stateDir: string): void {
  removeDurably(recordPath(stateDir));
}
