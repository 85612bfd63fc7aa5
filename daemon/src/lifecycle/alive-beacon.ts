// stewardd's alive beacon (shared/src/beacon.ts): while it serves, its main loop rewrites
// <socket>.alive every ALIVE_BEACON_PERIOD_MS with the time, whether it is ready, and its last STATUS
// verdict per network. A shim whose STATUS this loop is slow to answer (a burst of pods on a busy
// node) reads it and answers that verdict, so a live daemon behind on its work is never told as a
// frozen one (issue 37). It lives in the socket's directory (/run: never fsynced) and is replaced
// whole (temp file, rename) so a shim never reads half of it; quiesce removes it.

import { renameSync, rmSync, writeFileSync } from 'node:fs';
import type { Logger } from 'pino';
import {
  ALIVE_BEACON_MAX_NETWORKS,
  ALIVE_BEACON_PERIOD_MS,
  PROTOCOL_VERSION,
  STATUS_KEY_PATTERN,
  aliveBeaconPath,
  type AliveBeacon as Beat,
} from '@cni-steward/shared';

export class AliveBeacon {
  private readonly path: string;
  private readonly verdicts = new Map<string, boolean>();
  private timer: NodeJS.Timeout | undefined;
  private failing = false;

  constructor(
    socket: string,
    private readonly isReady: () => boolean,
    private readonly log: Pick<Logger, 'warn' | 'info'>,
    private readonly periodMs = ALIVE_BEACON_PERIOD_MS,
    private readonly now: () => number = Date.now,
  ) {
    this.path = aliveBeaconPath(socket);
  }

  /** Beats now and every period until stop(); the timer never holds the process open. */
  start(): void {
    if (this.timer) return;
    this.beat();
    this.timer = setInterval(() => this.beat(), this.periodMs);
    this.timer.unref();
  }

  /**
   * The verdict of a STATUS of the network `key` names (the shim's STATUS_KEY_HEADER; anything else
   * is not kept). The most recently asked ALIVE_BEACON_MAX_NETWORKS networks are kept.
   */
  noteStatus(key: string | undefined, passed: boolean): void {
    if (key === undefined || !STATUS_KEY_PATTERN.test(key)) return;
    this.verdicts.delete(key);
    this.verdicts.set(key, passed);
    if (this.verdicts.size > ALIVE_BEACON_MAX_NETWORKS) this.verdicts.delete(this.verdicts.keys().next().value!);
  }

  /** Stops beating and removes the beacon: a daemon that stops serving vouches for nothing. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    try {
      rmSync(this.path, { force: true });
    } catch (e) {
      this.log.warn({ err: (e as Error).message, beacon: this.path }, 'the alive beacon could not be removed');
    }
  }

  /** Writes one beat. A failure costs only the shortcut (STATUS waits for the answer): logged once. */
  beat(): void {
    const beat: Beat = {
      at: this.now(),
      pid: process.pid,
      protocol: PROTOCOL_VERSION,
      ready: this.isReady(),
      status: Object.fromEntries(this.verdicts),
    };
    const tmp = `${this.path}.tmp`;
    try {
      // Created afresh (O_EXCL): whatever was left at the temp name (a FIFO would hold this loop in
      // open(2), a symlink would be written through) is removed, not opened.
      rmSync(tmp, { force: true });
      writeFileSync(tmp, JSON.stringify(beat), { mode: 0o600, flag: 'wx' });
      renameSync(tmp, this.path);
      if (this.failing) this.log.info({ beacon: this.path }, 'the alive beacon is written again');
      this.failing = false;
    } catch (e) {
      if (!this.failing)
        this.log.warn(
          { err: (e as Error).message, beacon: this.path },
          'the alive beacon could not be written: a STATUS this daemon is slow to answer waits for the answer',
        );
      this.failing = true;
    }
  }
}
