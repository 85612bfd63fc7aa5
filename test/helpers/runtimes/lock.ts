// The machine-wide e2e lock: one e2e run at a time per machine, across every worktree and agent.
// RuntimeHost.create takes it; anything else that touches machine-wide places takes it directly.

import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const LOCK_DIR = join(existsSync('/run/lock') ? '/run/lock' : tmpdir(), 'cni-steward-e2e.lock');

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * One e2e run at a time per machine: the podman drop-in, /opt/cni/bin and the lexically
 * first conflist are machine-wide, and the residue check compares the whole machine. A lock dir
 * (atomic mkdir) holding the owner's pid; a dead owner's lock is taken over.
 */
export async function acquireMachineLock(timeoutMs = 15 * 60_000): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  let told = false;
  for (;;) {
    try {
      mkdirSync(LOCK_DIR);
      writeFileSync(join(LOCK_DIR, 'pid'), String(process.pid));
      return () => rmSync(LOCK_DIR, { recursive: true, force: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    let owner = NaN;
    try {
      owner = Number(readFileSync(join(LOCK_DIR, 'pid'), 'utf8'));
    } catch {
      /* being written, or its writer died between mkdir and write */
    }
    const age = (() => {
      try {
        return Date.now() - statSync(LOCK_DIR).mtimeMs;
      } catch {
        return 0;
      }
    })();
    if ((Number.isInteger(owner) && !pidAlive(owner)) || (!Number.isInteger(owner) && age > 10_000)) {
      rmSync(LOCK_DIR, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`another e2e run (pid ${owner}) has held ${LOCK_DIR} for too long`);
    if (!told) process.stderr.write(`e2e: waiting for another e2e run (pid ${owner}) to finish\n`);
    told = true;
    await new Promise((r) => setTimeout(r, 500));
  }
}
