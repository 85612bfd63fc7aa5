// A periodic self-check of what the daemon holds open by path (issue 19 item 5). A journal file
// deleted or replaced by rename while serving would take every write to an unlinked file, lost on
// restart: that is never repaired here; the daemon goes unhealthy and not ready, loudly, until an
// operator restarts it. A socket file deleted or replaced while serving would leave the daemon up
// and unreachable: that is repaired, by listening on the path again (`relisten`); the identity
// compared at the next check is then the new socket's, so a repaired path is not repaired again.

import { statSync } from 'node:fs';
import type { Logger } from 'pino';

export const SELF_CHECK_INTERVAL_MS = 1000;

interface Identity {
  dev: number;
  ino: number;
  /** Sockets only: a file created at the path just after ours was deleted often reuses its inode number. */
  ctimeNs?: bigint;
}

function identity(path: string, withCtime = false): Identity | undefined {
  try {
    const st = statSync(path, { bigint: true });
    return { dev: Number(st.dev), ino: Number(st.ino), ...(withCtime ? { ctimeNs: st.ctimeNs } : {}) };
  } catch {
    return undefined;
  }
}

function same(a: Identity, b: Identity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.ctimeNs === b.ctimeNs;
}

export interface SelfCheckOptions {
  dbPath: string;
  log: Logger;
  intervalMs?: number;
  /** The socket path to watch, and how to listen on it again (after which it is a socket of ours). */
  socket?: { path: string; relisten: () => Promise<void>; onRelisten?: (why: string) => void };
}

export class SelfCheck {
  private readonly journalId: Identity | undefined;
  private journalProblem: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private socketId: Identity | undefined;
  private relistening = false;
  private stopped = false;
  private socketProblem: string | undefined;

  constructor(private readonly o: SelfCheckOptions) {
    this.journalId = identity(o.dbPath);
  }

  /** Call once the socket listens. */
  start(): void {
    if (this.o.socket) this.socketId = identity(this.o.socket.path, true);
    this.timer = setInterval(() => this.check(), this.o.intervalMs ?? SELF_CHECK_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
  }

  /** Why the daemon must not be ready, or undefined. */
  problem(): string | undefined {
    return this.journalProblem ?? this.socketProblem;
  }

  check(): void {
    this.checkJournal();
    this.checkSocket();
  }

  private checkSocket(): void {
    const sock = this.o.socket;
    if (sock === undefined || this.socketId === undefined || this.relistening || this.stopped) return;
    const now = identity(sock.path, true);
    if (now !== undefined && same(now, this.socketId)) return;
    const why =
      now === undefined
        ? `the socket ${sock.path} was deleted while stewardd served`
        : `the socket ${sock.path} was replaced while stewardd served (not the socket stewardd listens on)`;
    this.relistening = true;
    this.o.log.warn({ socket: sock.path }, `${why}; listening on it again`);
    sock
      .relisten()
      .then(() => {
        this.socketId = identity(sock.path, true);
        this.socketProblem = undefined;
        sock.onRelisten?.(now === undefined ? 'deleted' : 'replaced');
        this.o.log.info({ socket: sock.path }, `listening on ${sock.path} again`);
      })
      .catch((e: unknown) => {
        // Tried again at the next check; unhealthy meanwhile, naming the path.
        this.socketProblem = `${why} and listening on it again failed: ${(e as Error).message}`;
        this.o.log.error({ socket: sock.path }, this.socketProblem);
      })
      .finally(() => (this.relistening = false));
  }

  private checkJournal(): void {
    if (this.journalProblem !== undefined || this.journalId === undefined) return;
    const now = identity(this.o.dbPath);
    let why: string | undefined;
    if (now === undefined) why = `the journal ${this.o.dbPath} was deleted while stewardd served`;
    else if (now.dev !== this.journalId.dev || now.ino !== this.journalId.ino)
      why = `the journal ${this.o.dbPath} was replaced while stewardd served (inode ${this.journalId.ino} open, ${now.ino} at the path)`;
    if (why === undefined) return;
    this.journalProblem = `${why}: writes would go to a file no restart reads; restart stewardd`;
    this.o.log.error({ db: this.o.dbPath }, this.journalProblem);
  }
}
