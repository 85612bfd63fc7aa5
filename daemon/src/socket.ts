// Preparing the Unix socket path: a missing directory is created 0700; an existing one is used as
// it is (never chmodded: the daemon does not change a directory it did not create) but refused
// when group or others can write to it, since anyone who can write there can replace the socket
// with their own; a stale socket is replaced, a live one refused.

import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, unlinkSync } from 'node:fs';
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
 * connection handed to `server` (the daemon's HTTP server). The listener it replaces is closed
 * first (issue 28 item 5: 20 deletions kept 21 listeners and their descriptors), and only once
 * nothing live answers at the path: closing a Unix listener unlinks the path it was bound to
 * (libuv does), which at that moment is the deleted name or a dead file prepareSocketPath would
 * remove anyway, never the new socket. If a live server answers there, nothing is closed and the
 * relisten fails (the self-check tries again, /healthz says why).
 */
export async function listenAgain(
  path: string,
  server: Server,
  replaces: { close(): unknown },
  guard?: ConnectionGuard,
): Promise<NetServer> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  if (existsSync(path) && (await answers(path))) throw new Error(`another server is already serving on ${path}`);
  replaces.close();
  await prepareSocketPath(path);
  const listener = createServer((conn) => server.emit('connection', conn));
  guard?.watch(listener);
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

/** The soft RLIMIT_NOFILE of this process, from /proc/self/limits; undefined when unlimited or unknown. */
export function softFdLimit(limits = '/proc/self/limits'): number | undefined {
  try {
    const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(readFileSync(limits, 'utf8'));
    return m?.[1] === undefined || m[1] === 'unlimited' ? undefined : Number(m[1]);
  } catch {
    return undefined;
  }
}

/** Descriptors kept free of the socket's connections: the journal, the spawner, the metrics listener, logs. */
export const FD_HEADROOM = 128;

/**
 * Connections the CNI socket cannot take for want of file descriptors, made visible (issue 28 item 5).
 * When accept(2) fails with EMFILE or ENFILE, libuv accepts and closes the waiting connections on a
 * descriptor it keeps in reserve and tells nobody: clients see resets, the daemon logged nothing. So
 * each listener is capped at the soft RLIMIT_NOFILE less FD_HEADROOM connections (net.Server
 * maxConnections): a connection past it is closed at once with a 'drop' event, counted and logged,
 * and the descriptors left keep the journal, the spawner and the answers of the connections held
 * working. An accept error libuv does report ('error', when its reserve descriptor is gone too) is
 * counted and logged the same way, never an unhandled 'error' that would end the daemon. Logged at
 * most once per 10 s, with how many were refused since the last line.
 */
export class ConnectionGuard {
  private cap: number | undefined;
  private readonly servers: NetServer[] = [];
  private timer: NodeJS.Timeout | undefined;
  private unlogged = 0;
  private lastLog = -Infinity;

  constructor(
    private readonly onRefused: (why: 'fd_cap' | 'EMFILE' | 'ENFILE') => void,
    private readonly log: (refused: number, why: string) => void,
    private readonly limit: () => number | undefined = () => softFdLimit(),
    private readonly logEveryMs = 10_000,
  ) {
    this.refresh();
  }

  /** The cap on each listener's connections, or undefined when the descriptor limit is unknown. */
  get maxConnections(): number | undefined {
    return this.cap;
  }

  /** Caps `server` and counts what it refuses; the limit is read again every second (prlimit can change it). */
  watch(server: NetServer): void {
    this.servers.push(server);
    if (this.cap !== undefined) server.maxConnections = this.cap;
    server.on('drop', () => this.refused('fd_cap'));
    server.on('error', (e: NodeJS.ErrnoException) => {
      if (e.syscall === 'accept' && (e.code === 'EMFILE' || e.code === 'ENFILE')) this.refused(e.code);
    });
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.refresh(), 1000);
      this.timer.unref();
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  refresh(): void {
    const limit = this.limit();
    this.cap = limit === undefined ? undefined : Math.max(8, limit - FD_HEADROOM);
    for (const s of this.servers) if (this.cap !== undefined) s.maxConnections = this.cap;
  }

  private refused(why: 'fd_cap' | 'EMFILE' | 'ENFILE'): void {
    this.onRefused(why);
    this.unlogged++;
    const now = performance.now();
    if (now - this.lastLog < this.logEveryMs) return;
    this.lastLog = now;
    this.log(this.unlogged, why);
    this.unlogged = 0;
  }
}
