// One batch of a spool pass run (engine/spool.ts reads the batches): each spooled DEL handed to the
// engine's DEL path, its file removed once the DEL is done or journaled as teardown work, and kept
// when it failed before the journal had it (the runtime was told that DEL was done when the shim
// spooled it: the file is then its only record). What a pass met is told once a pass (PassNotes).

import { unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ErrorCode, podFromCniArgs, podLogFields } from '@cni-steward/shared';
import { JournalWriteError } from '../store/write-error.js';
import type { Engine } from './engine.js';
import type { SpooledDel, SpoolReport } from './spool-entries.js';

/** What a pass met that an operator must hear of: told once a pass (PassNotes.tell), not once a file. */
export class PassNotes {
  /** Files kept (their DEL could not reach the journal), and the first one's log fields. */
  kept = 0;
  firstKept: Record<string, unknown> | undefined;
  /** Files whose DEL is done but that could not be removed, and the first one. */
  stuck = 0;
  firstStuck: Record<string, unknown> | undefined;

  tell(log: Logger): void {
    if (this.kept > 0)
      log.error(
        { ...this.firstKept, kept: this.kept },
        `${this.kept} spooled DEL(s) failed before their teardown was journaled; their files stay for the next pass`,
      );
    if (this.stuck > 0)
      log.error(
        { ...this.firstStuck, stuck: this.stuck },
        `${this.stuck} spooled DEL(s) done, but their files could not be removed; the next pass finds them done`,
      );
  }
}

/** One spooled DEL's end: its file removed (or to be found done), or kept; `journalDown` ends the pass. */
type Outcome = { kept: false; journalDown?: undefined } | { kept: true; journalDown: boolean };

/**
 * Runs a batch's DELs together, each file removed once its DEL is done or journaled as teardown
 * work, and kept when it failed before the journal had it. True when the journal itself failed (a
 * full disk, a journal that cannot be read): the rest of the pass would fail the same way.
 */
export async function runBatch(
  engine: Engine,
  spoolDir: string,
  batch: readonly SpooledDel[],
  report: SpoolReport,
  settled: (name: string) => void,
  notes: PassNotes,
  log: Logger,
): Promise<boolean> {
  const outcomes = await Promise.all(
    batch.map(async (entry) => {
      const outcome = await runOne(engine, spoolDir, entry, notes, log);
      if (outcome.kept) report.kept = (report.kept ?? 0) + 1;
      else report.ingested++;
      settled(entry.name);
      return outcome;
    }),
  );
  return outcomes.some((o) => o.journalDown === true);
}

/** One spooled DEL: run, then its file removed unless only the file remembers the DEL. */
async function runOne(
  engine: Engine,
  spoolDir: string,
  { name, req }: SpooledDel,
  notes: PassNotes,
  log: Logger,
): Promise<Outcome> {
  const file = join(spoolDir, name);
  const failure = await startDel(engine, req).then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  if (failure !== undefined) {
    const fields = {
      file,
      containerId: req.env.containerId,
      ...podLogFields(podFromCniArgs(req.env.args)),
      err: failure.message,
    };
    const journaled = journaledAfterFailure(engine, req);
    if (journaled !== true) {
      // The runtime was told this DEL was done when it was spooled: the file is all that
      // remembers it, so it stays for the next pass (a scheduler tick, the next start).
      notes.kept++;
      notes.firstKept ??= fields;
      // The journal's own failure to write (code 11: full, I/O, read-only) or to read ends the pass;
      // a constraint (104, a bug of one row) does not hold the files behind it.
      const journalDown =
        journaled === undefined || (failure instanceof JournalWriteError && failure.code === ErrorCode.TryAgainLater);
      return { kept: true, journalDown };
    }
    // Its teardown is journaled (and retried by the scheduler): the file has done its job.
    log.warn(fields, 'spooled DEL did not complete; its teardown stays queued');
  }
  try {
    unlinkSync(file);
  } catch (e) {
    // Its DEL is done: a pass that finds the file again is answered from the tombstone (no plugin
    // runs), so the pass goes on, and one file that cannot go holds none behind it.
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') {
      notes.stuck++;
      notes.firstStuck ??= { file, containerId: req.env.containerId, err: (e as Error).message };
    }
  }
  return { kept: false };
}

/**
 * The spooled DEL, started at once (in the caller's turn, as a runtime DEL is: the container's queue
 * takes it in order). Anything spooledDel throws before it returns a promise is a failure of this
 * DEL like any other, never one of the whole pass.
 */
function startDel(engine: Engine, req: SpooledDel['req']): Promise<string> {
  try {
    return engine.spooledDel(req);
  } catch (e) {
    return Promise.reject(e as Error);
  }
}

/** Whether a failed spooled DEL's teardown is in the journal; undefined when the journal cannot say. */
function journaledAfterFailure(engine: Engine, req: SpooledDel['req']): boolean | undefined {
  let journaled: boolean | undefined;
  try {
    journaled = engine.spooledDelJournaled(req);
  } catch {
    // The journal cannot be read: it cannot say (undefined).
  }
  return journaled;
}
