// The DEL spool: requests the shim (or a degraded daemon) wrote while stewardd could not take them,
// drained in the background once the socket is open (SpoolDrain, started by daemon.ts) and then on
// every scheduler tick (ingestSpool). Every entry is handled like a runtime DEL, coalesced per
// attachment by the engine's DEL path (one delegate DEL however many files name it) and run at
// background priority, behind ADDs and CHECKs; its file is removed only once that DEL is done or
// journaled as teardown work. A container with spooled DELs pending holds its new requests until
// they are drained. Reading is bounded: the directory is iterated in batches (opendir), each entry read
// safely or moved aside (spool-entries.ts), never allowed to block the event loop.

import { opendirSync, type Dir, type Dirent } from 'node:fs';
import type { Logger } from 'pino';
import { SPOOL_NAME } from '@cni-steward/shared';
import type { Engine } from './engine.js';
import { readBatch, type SpoolReport } from './spool-entries.js';
import { PassNotes, runBatch } from './spool-run.js';

export { MAX_SPOOL_FILE_BYTES, type SpoolReport } from './spool-entries.js';

/** The pass draining each dir in this process: never two passes over one dir at once. */
const draining = new Map<string, Promise<SpoolReport>>();

/**
 * One pass over the spool (drainPass), unless one is already running over this dir: then a
 * scheduler tick skips it (`after: false`), and the start-up drain (`after: true`) waits for it to
 * end, and for any that started meanwhile, and then makes a pass of its own, which sees every file
 * the other left. The start-up drain must never end before a pass it skipped (issue 28 item 5: it
 * gave up after two tries 200 ms apart and released its holds while a tick's pass still had the
 * held containers' spooled DELs to run, so a reused container id's ADD could run before them).
 */
async function drainOnce(
  engine: Engine,
  spoolDir: string,
  log: Logger,
  settled: (name: string) => void = () => undefined,
  after = false,
): Promise<SpoolReport> {
  if (after) for (let p = draining.get(spoolDir); p; p = draining.get(spoolDir)) await p.catch(() => undefined);
  else if (draining.has(spoolDir)) return { ingested: 0, rejected: 0 };
  // No await between the check above and this: the pass is registered before anything else runs.
  const pass = drainPass(engine, spoolDir, log, settled);
  draining.set(spoolDir, pass);
  try {
    return await pass;
  } finally {
    if (draining.get(spoolDir) === pass) draining.delete(spoolDir);
  }
}

/**
 * One pass over the spool: batches of at most BATCH_FILES entries (BATCH_BYTES of requests), each
 * batch's DELs run together (identical ones coalesce in the engine), then their files removed.
 * `settled(name)` is told of every entry handled or moved aside.
 */
async function drainPass(
  engine: Engine,
  spoolDir: string,
  log: Logger,
  settled: (name: string) => void,
): Promise<SpoolReport> {
  const report: SpoolReport = { ingested: 0, rejected: 0 };
  let dir;
  try {
    dir = opendirSync(spoolDir, { bufferSize: 64 });
  } catch {
    return report;
  }
  try {
    await drainEntries(engine, dir, spoolDir, report, settled, log);
  } finally {
    try {
      dir.closeSync();
    } catch {
      // already closed
    }
  }
  return report;
}

/** Every entry `dir` lists, batch by batch, into `report`. */
async function drainEntries(
  engine: Engine,
  dir: Pick<Dir, 'readSync'>,
  spoolDir: string,
  report: SpoolReport,
  settled: (name: string) => void,
  log: Logger,
): Promise<void> {
  const notes = new PassNotes();
  try {
    for (;;) {
      const { batch, end } = readBatch(dir, spoolDir, report, settled, log);
      const journalDown = await runBatch(engine, spoolDir, batch, report, settled, notes, log);
      // A DEL kept because the journal itself failed says the rest would fail too: the pass ends,
      // and the next (a scheduler tick, about a second on) starts again.
      if (end || journalDown) return;
      // Let requests on the socket in between batches.
      await new Promise((r) => setImmediate(r));
    }
  } finally {
    notes.tell(log);
  }
}

/**
 * The spooled DELs of these names in `spoolDir` alone, handled as a pass handles them (a name gone
 * meanwhile is skipped; a pass over the dir may run them too, which the engine coalesces). For an
 * ADD whose container has DELs spooled while stewardd was serving (spool-dirs.ts).
 */
export async function ingestNames(
  engine: Engine,
  spoolDir: string,
  names: readonly string[],
  log: Logger,
): Promise<SpoolReport> {
  const report: SpoolReport = { ingested: 0, rejected: 0 };
  let i = 0;
  const listing = { readSync: () => (i < names.length ? ({ name: names[i++] } as Dirent) : null) };
  await drainEntries(engine, listing, spoolDir, report, () => undefined, log);
  return report;
}

/** Handles every spooled DEL like a runtime DEL; anything unreadable is moved aside, never lost (scheduler ticks). */
export function ingestSpool(engine: Engine, spoolDir: string, log: Logger): Promise<SpoolReport> {
  return drainOnce(engine, spoolDir, log);
}

/**
 * The start-up drain. scan() (before the socket opens) lists only names, in batches, counting the
 * spooled DELs per container and holding that container's requests (Engine.spoolHold); start()
 * (after) drains in the background and releases each container when its last counted file is done.
 */
export class SpoolDrain {
  /**
   * The containers the scan holds, by spool-name prefix, each with the names the scan listed for it:
   * only those settle it. A file renamed in after the listing (whatever its name's time stamp: a
   * writer stamps before it renames) is no DEL the scan counted and must not release it early.
   */
  private readonly perContainer = new Map<string, { names: Set<string>; release: () => void; held: Promise<void> }>();
  private total = 0;
  /** Entries the scan counted whose names are not spoolRequest's (they hold no container). */
  private unnamed = 0;
  private running: Promise<SpoolReport> | undefined;

  constructor(
    private readonly engine: Engine,
    private readonly spoolDir: string,
    private readonly log: Logger,
  ) {}

  /** Spooled DELs found at start and not drained yet. */
  get pending(): number {
    return this.total;
  }

  /** Lists the spool (names only) and holds the containers it names; returns how many DELs wait. */
  scan(): number {
    let dir;
    try {
      dir = opendirSync(this.spoolDir, { bufferSize: 256 });
    } catch {
      return 0;
    }
    try {
      for (let ent = dir.readSync(); ent !== null; ent = dir.readSync()) {
        if (!ent.name.endsWith('.json')) continue;
        this.total++;
        const m = SPOOL_NAME.exec(ent.name);
        if (!m) {
          this.unnamed++;
          continue;
        }
        const prefix = m[2] as string;
        let c = this.perContainer.get(prefix);
        if (!c) {
          let release!: () => void;
          const held = new Promise<void>((r) => (release = r));
          c = { names: new Set(), release, held };
          this.perContainer.set(prefix, c);
        }
        c.names.add(ent.name);
      }
    } finally {
      dir.closeSync();
    }
    if (this.total > 0) {
      this.engine.spoolHold = (containerId) => this.perContainer.get(containerId.slice(0, 64))?.held;
      this.log.info(
        { spooled: this.total, containers: this.perContainer.size },
        `draining ${this.total} spooled DELs in the background`,
      );
    }
    return this.total;
  }

  /** Drains in the background; resolves when done (every held container is released by then). */
  start(): Promise<SpoolReport> {
    if (this.total === 0) return Promise.resolve({ ingested: 0, rejected: 0 });
    const t0 = Date.now();
    this.running ??= (async () => {
      // A tick of the scheduler may be in a pass already (its DELs are not settled here): wait for
      // it to end, then drain everything it left. Only then are the holds released.
      const report = await drainOnce(this.engine, this.spoolDir, this.log, (name) => this.settled(name), true).catch(
        (e: unknown) => {
          this.log.error({ err: (e as Error).message }, 'spool drain failed; the scheduler retries it on its ticks');
          return { ingested: 0, rejected: 0 };
        },
      );
      this.finish();
      this.log.info({ ...report, ms: Date.now() - t0 }, 'spooled DELs drained');
      return report;
    })();
    return this.running;
  }

  private settled(name: string): void {
    const m = SPOOL_NAME.exec(name);
    if (!m) {
      if (this.unnamed > 0) {
        this.unnamed--;
        this.total--;
      }
      return;
    }
    // Not listed by the scan (written after it): not one the scan counted.
    const c = this.perContainer.get(m[2] as string);
    if (!c?.names.delete(name)) return;
    this.total--;
    if (c.names.size === 0) {
      this.perContainer.delete(m[2] as string);
      c.release();
    }
  }

  private finish(): void {
    for (const c of this.perContainer.values()) c.release();
    this.perContainer.clear();
    this.total = 0;
    this.unnamed = 0;
    this.engine.spoolHold = undefined;
  }
}
