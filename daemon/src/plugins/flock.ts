// Holding another program's flock(2) lock from Node, which has no flock: the daemon opens the lock
// file and hands that descriptor to util-linux's `flock --exclusive 3` as its fd 3. flock(1) locks the
// open file description it shares with the daemon's descriptor, and exits; the lock stays held, by
// the daemon's descriptor, until the daemon closes it (or dies: the kernel closes it then, so a lock
// is never left behind). No shell, no process kept running. The audit reads host-local's lease files
// under host-local's own lock this way (host-local flocks <dataDir>/<network>/lock).
//
// Spawned from the daemon itself rather than the plugin spawner: the descriptor must belong to the
// daemon. Node forks on its event loop, so each lock costs the daemon one fork (a few ms at most, see
// docs/performance.md); the audit takes one per network directory per pass. Node opens every file
// close-on-exec, so no other child inherits the descriptor.

import { spawn } from 'node:child_process';
import { closeSync, constants, fstatSync, openSync } from 'node:fs';

export interface HeldLock {
  /** Releases the lock (closes the daemon's descriptor); idempotent. */
  release(): void;
}

/**
 * An exclusive flock on `file` (created if absent, 0600, as host-local creates it; a symlink or
 * anything but a regular file is refused), waiting at most timeoutMs for whoever holds it. Rejects
 * when it could not be had in time or flock(1) failed.
 */
export function holdFlock(file: string, timeoutMs: number, flockPath = 'flock'): Promise<HeldLock> {
  let fd: number;
  try {
    // Not through a symlink (nothing is created where it points), and never blocking: open(2) of a
    // FIFO named `lock` would otherwise wait for a writer on the daemon's event loop, forever.
    fd = openSync(file, constants.O_RDONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
  } catch (e) {
    return Promise.reject(new Error(`cannot open the lock file ${file}: ${(e as Error).message}`));
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    return Promise.reject(new Error(`cannot lock ${file}: not a regular file`));
  }
  let closed = false;
  const release = () => {
    if (closed) return;
    closed = true;
    closeSync(fd);
  };
  const seconds = Math.max(0.001, timeoutMs / 1000).toFixed(3);
  return new Promise<HeldLock>((resolve, reject) => {
    const child = spawn(flockPath, ['--exclusive', '--wait', seconds, '3'], {
      stdio: ['ignore', 'ignore', 'pipe', fd],
      env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' },
      shell: false,
    });
    let stderr = '';
    child.stderr?.on('data', (b: Buffer) => {
      if (stderr.length < 2000) stderr += b.toString();
    });
    child.on('error', (e) => {
      release();
      reject(new Error(`cannot run flock for ${file}: ${e.message}`));
    });
    child.on('close', (code, signal) => {
      if (code === 0) return resolve({ release });
      release();
      // flock(1) exits 1 when --wait ran out.
      const why = code === 1 ? `still held by another process after ${timeoutMs} ms` : `flock ${signal ?? code}`;
      reject(new Error(`cannot lock ${file}: ${why}${stderr.trim() ? ` (${stderr.trim()})` : ''}`));
    });
  });
}
