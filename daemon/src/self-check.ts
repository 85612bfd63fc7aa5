// A periodic self-check of what the daemon holds open by path (issue 19 item 5). A journal file
// deleted or replaced by rename while serving would take every write to an unlinked file, lost on
// restart: that is never repaired here; the daemon goes unhealthy and not ready, loudly, until an
// operator restarts it.

import { statSync } from 'node:fs';
import type { Logger } from 'pino';

export const SELF_CHECK_INTERVAL_MS = 1000;

interface Identity {
  dev: number;
  ino: number;
}

function identity(path: string): Identity | undefined {
  try {
    const st = statSync(path);
    return { dev: st.dev, ino: st.ino };
  } catch {
    return undefined;
  }
}

export interface SelfCheckOptions {
  dbPath: string;
  log: Logger;
  intervalMs?: number;
}

export class SelfCheck {
  private readonly journalId: Identity | undefined;
  private journalProblem: string | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly o: SelfCheckOptions) {
    this.journalId = identity(o.dbPath);
  }

  /** Call once the socket listens. */
  start(): void {
    this.timer = setInterval(() => this.check(), this.o.intervalMs ?? SELF_CHECK_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Why the daemon must not be ready, or undefined. */
  problem(): string | undefined {
    return this.journalProblem;
  }

  check(): void {
    this.checkJournal();
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
