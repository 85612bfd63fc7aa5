// stewardd's alive beacon (shared/src/beacon.ts): while it serves, its main loop has <socket>.alive
// rewritten with the time, whether it is ready, and its last STATUS verdict per network, within
// ALIVE_BEACON_PERIOD_MS of each connection it accepts (and of each STATUS verdict), then every period
// while any connection stays open. A shim whose STATUS this loop is slow to answer (a burst of pods on
// a busy node) reads it and answers that verdict, so a live daemon behind on its work is never told as
// a frozen one (issue 37): a shim reads it only during its call, which is a connection, so a daemon
// with none open writes none (beating every period regardless cost an idle stewardd 0.6-0.8 % of a core
// here, 2 Dec).
// It lives in the socket's directory (/run: never fsynced) and is replaced whole (temp file, rename)
// so a shim never reads half of it; quiesce removes it.
//
// The files are written off the loop (the thread pool), one beat at a time: where /run is on a disk's
// file system rather than tmpfs, a rename over the old beacon waits for that file system's journal,
// which the node's fsyncs keep busy in a burst (a CPU profile of a 100-pod burst had the loop blocked
// in rename 1.7 ms per beat, 10 times a second). Only start()'s first beat is written in place, so the
// beacon exists before this daemon answers anything as ready.

import { rename, renameSync, rm, rmSync, writeFile, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import {
  ALIVE_BEACON_MAX_NETWORKS,
  ALIVE_BEACON_PERIOD_MS,
  PROTOCOL_VERSION,
  STATUS_KEY_PATTERN,
  aliveBeaconPath,
  type AliveBeacon as Beat,
} from '@cni-steward/shared';

/** The three file operations of a beat (tests slow them down). */
export interface BeaconFiles {
  /** Removes whatever is at `path` (a directory too); nothing there is no error. */
  remove(path: string): Promise<void>;
  writeFile(path: string, data: string, options: { mode: number; flag: string }): Promise<void>;
  rename(from: string, to: string): Promise<void>;
}

// The callback API, promisified: a FileHandle per beat (fs/promises) costs the loop more than the write.
const removeTree = promisify(rm);
const threadPool: BeaconFiles = {
  remove: (path) => removeTree(path, { recursive: true, force: true }),
  writeFile: promisify(writeFile),
  rename: promisify(rename),
};

/** The same operations done in place: they settle in microtasks, before the loop turns. */
const inPlace: BeaconFiles = {
  remove: async (path) => rmSync(path, { recursive: true, force: true }),
  writeFile: async (path, data, options) => writeFileSync(path, data, options),
  rename: async (from, to) => renameSync(from, to),
};

export class AliveBeacon {
  private readonly path: string;
  private readonly verdicts = new Map<string, boolean>();
  private started = false;
  /** clock() when the last beat was asked for: wake() asks at most one a period. */
  private lastAsked = -Infinity;
  /** Connections open: while any is, a beat every period (its call sees readiness change, a failed beat retried). */
  private open = 0;
  /** The beat wake() put off until a period after the last one. */
  private due: NodeJS.Timeout | undefined;
  private failing = false;
  private stopped = false;
  /** The beats being written, while they are; `again` asks it for one more with the state of now. */
  private writing: Promise<void> | undefined;
  private again = false;

  constructor(
    socket: string,
    private readonly isReady: () => boolean,
    private readonly log: Pick<Logger, 'warn' | 'info'>,
    private readonly periodMs = ALIVE_BEACON_PERIOD_MS,
    private readonly now: () => number = Date.now,
    private readonly files: BeaconFiles = threadPool,
    /** Monotonic ms, for the period between beats (the wall clock `now` dates them, as the shim reads them). */
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.path = aliveBeaconPath(socket);
  }

  /**
   * Beats now, in place; from then on wake() asks for beats, until stop(). Resolves when the first
   * beat is written (it is, before the loop turns, unless a beat() was already being written: then
   * one more follows it).
   */
  start(): Promise<void> {
    if (this.started || this.stopped) return Promise.resolve();
    this.started = true;
    this.lastAsked = this.clock();
    this.again = true;
    this.writing ??= this.writeBeats(inPlace);
    return this.writing;
  }

  /**
   * A connection accepted (a shim's call is one): a beat within a period, then one every period
   * until it closes.
   */
  watch(connection: { once(event: 'close', listener: () => void): unknown }): void {
    this.open++;
    connection.once('close', () => this.open--);
    this.wake();
  }

  /**
   * Something a beat vouches for may be waiting (a connection accepted, a verdict decided): a beat
   * now, or, when one was asked for less than a period ago, one when the period is up; after it,
   * another every period while a connection is open. So while the loop runs every connection is
   * followed by a beat within a period, as many connections as come. The timer never holds the
   * process open.
   */
  wake(): void {
    if (!this.started || this.stopped || this.due !== undefined) return;
    const wait = this.lastAsked + this.periodMs - this.clock();
    if (wait <= 0) return this.beatNow();
    this.due = setTimeout(() => {
      this.due = undefined;
      this.beatNow();
    }, wait);
    this.due.unref();
  }

  private beatNow(): void {
    this.lastAsked = this.clock();
    void this.beat();
    if (this.open > 0) this.wake();
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
    this.wake();
  }

  /**
   * Stops beating and removes the beacon: a daemon that stops serving vouches for nothing. A beat
   * still being written removes it again when it lands; the promise resolves then (await it before
   * a successor may write its own beacon at the same names, or before this process exits).
   */
  stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.due);
    this.due = undefined;
    this.remove();
    return this.writing ?? Promise.resolve();
  }

  /**
   * Writes a beat off the loop. Asked for while one is being written, one more follows it with the
   * state of then (never more than one waits). Resolves when a beat at least as new is written (or
   * failed: a failure costs only the shortcut, STATUS waits for the answer; logged once).
   */
  beat(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.again = true;
    this.writing ??= this.writeBeats(this.files);
    return this.writing;
  }

  private async writeBeats(files: BeaconFiles): Promise<void> {
    try {
      while (this.again && !this.stopped) {
        this.again = false;
        await this.writeOne(files);
      }
    } finally {
      this.writing = undefined;
    }
  }

  private async writeOne(files: BeaconFiles): Promise<void> {
    const tmp = `${this.path}.tmp`;
    try {
      const beat: Beat = {
        at: this.now(),
        pid: process.pid,
        protocol: PROTOCOL_VERSION,
        ready: this.isReady(),
        status: Object.fromEntries(this.verdicts),
      };
      // Created afresh (O_EXCL): whatever was left at the temp name (a FIFO would hold the writer in
      // open(2), a symlink would be written through, a directory would fail every beat) is removed,
      // not opened.
      const write = () => files.writeFile(tmp, JSON.stringify(beat), { mode: 0o600, flag: 'wx' });
      await write().catch(async (e: NodeJS.ErrnoException) => {
        if (e.code !== 'EEXIST') throw e;
        await files.remove(tmp);
        await write();
      });
      await files.rename(tmp, this.path);
      // Landed after stop(): this daemon no longer vouches for anything.
      if (this.stopped) this.remove();
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

  private remove(): void {
    try {
      rmSync(this.path, { force: true });
    } catch (e) {
      this.log.warn({ err: (e as Error).message, beacon: this.path }, 'the alive beacon could not be removed');
    }
  }
}
