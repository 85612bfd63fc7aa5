// Watching processes a test did not start itself (plugins a daemon ran, their children): whether a
// pid is alive, the pid a fixture wrote, and polling until a condition holds.

import { existsSync, readFileSync } from 'node:fs';

/** Whether a pid names a live (not zombie) process. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}

/** The pid a fixture wrote to `file`. */
export const readPid = (file: string): number => Number(readFileSync(file, 'utf8'));

/** Whether the fixture has written its pid (the file exists a moment before its content does). */
export const pidWritten = (file: string): boolean => existsSync(file) && readPid(file) > 0;

/** Polls `cond` every `everyMs` until it holds; throws naming `what` after `timeoutMs`. */
export async function until(what: string, cond: () => boolean, timeoutMs = 10_000, everyMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
