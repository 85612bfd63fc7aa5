// Preparing the Unix socket path: a missing directory is created 0700; an existing one is used as
// it is (never chmodded: the daemon does not change a directory it did not create) but refused
// when group or others can write to it, since anyone who can write there can replace the socket
// with their own; a stale socket is replaced, a live one refused.

import { chmodSync, existsSync, mkdirSync, statSync, unlinkSync } from 'node:fs';
import type { Server } from 'node:http';
import { connect, createServer, type Server as NetServer } from 'node:net';
import { dirname } from 'node:path';

function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ path });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Why `dir` may not hold the socket, or undefined when it may. */
export function socketDirProblem(dir: string): string | undefined {
  const st = statSync(dir);
  if (!st.isDirectory()) return `${dir} is not a directory`;
  const mode = (st.mode & 0o7777).toString(8).padStart(4, '0');
  if ((st.mode & 0o022) !== 0) {
    return (
      `socket directory ${dir} is writable by group or others (mode ${mode}): anyone who can write there could ` +
      "replace stewardd's socket with their own; put --socket in a directory only its owner can write " +
      '(stewardd creates a missing one with mode 0700), e.g. /run/steward/stewardd.sock'
    );
  }
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid && st.uid !== 0) {
    return `socket directory ${dir} belongs to uid ${st.uid}, neither root nor this process (uid ${uid}): its owner could replace the socket`;
  }
  return undefined;
}

export async function prepareSocketPath(path: string): Promise<void> {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const problem = socketDirProblem(dir);
  if (problem) throw new Error(problem);
  if (!existsSync(path)) return;
  if (await answers(path)) throw new Error(`another stewardd is already serving on ${path}`);
  unlinkSync(path);
}

export function restrictSocket(path: string): void {
  chmodSync(path, 0o600);
}

/**
 * Listens on `path` again for a server whose socket file was deleted or replaced while it served
 * (the self-check finds that): the same directory rules and 0600 mode as at start, and every
 * connection handed to `server` (the daemon's HTTP server). The listener that lost its path is
 * left open on purpose: closing a Unix listener unlinks the path it was bound to (libuv does),
 * which is now the new socket; it is closed with the daemon.
 */
export async function listenAgain(path: string, server: Server): Promise<NetServer> {
  await prepareSocketPath(path);
  const listener = createServer((conn) => server.emit('connection', conn));
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen({ path }, () => {
      listener.off('error', reject);
      resolve();
    });
  });
  restrictSocket(path);
  return listener;
}
