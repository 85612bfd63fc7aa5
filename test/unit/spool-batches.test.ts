// The spool drain's bounds and the start-up holds' edge, against a recording engine (spool.ts asks
// it for spooledDel only, and sets spoolHold), so what is pinned is what the drain hands the engine:
//  - a pass reads the spool in batches of at most 256 entries or 8 MiB of requests (BATCH_FILES,
//    BATCH_BYTES: what the drain holds in memory at once, and how long requests on the socket wait
//    for their turn); a batch's DELs run together, the next batch only after they are done; an
//    entry listed but gone before its batch reads it is skipped, not moved to rejected/;
//  - a spooled DEL stamped in the very millisecond the start-up scan began, and listed by it, is one
//    the scan counted: its container is released once it is done, not only at the end of the drain;
//    one stamped in that millisecond but written after the listing is no such DEL: only the names the
//    scan listed settle a container, so it is not released early.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import type { Engine } from '../../daemon/src/engine/engine.js';
import { SpoolDrain, ingestSpool } from '../../daemon/src/engine/spool.js';
import { NETNS, conf, deferred, silentLog } from '../helpers/engine-fakes.js';

const root = mkdtempSync(join(tmpdir(), 'steward-spool-batches-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => {
  const d = join(root, `spool-${++n}`);
  mkdirSync(d);
  return d;
};

const spoolName = (t: number, id: string, i: number) =>
  `${String(t).padStart(15, '0')}-${id}-${i.toString(16).padStart(8, '0')}.json`;

function wire(containerId: string): string {
  return JSON.stringify({
    env: { CNI_COMMAND: 'DEL', CNI_CONTAINERID: containerId, CNI_NETNS: NETNS, CNI_IFNAME: 'eth0', CNI_PATH: '/fake' },
    config: conf([{ type: 'one' }]),
  });
}

/**
 * An engine that records its spooled DELs in batches: a batch is the DELs that were running at the
 * same time (each DEL answers on the next microtask unless `gate` says otherwise; the drain starts a
 * batch's DELs together and the next batch only once they are all done).
 */
function recordingEngine(gate: (containerId: string) => Promise<void> | undefined = () => undefined) {
  const batches: number[] = [];
  const done: string[] = [];
  let running = 0;
  const engine = {
    spoolHold: undefined,
    async spooledDel(req: { env: { containerId: string } }): Promise<string> {
      if (running === 0) batches.push(0);
      running++;
      batches[batches.length - 1]!++;
      await (gate(req.env.containerId) ?? Promise.resolve());
      running--;
      done.push(req.env.containerId);
      return '{}';
    },
  };
  return { engine: engine as unknown as Engine, batches, done };
}

/** Resolves once `cond` holds, checking once per event loop turn (no wall-clock wait). */
async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setImmediate(r));
}

describe('a spool pass reads in bounded batches', () => {
  test('at most 256 entries a batch: 257 spooled DELs are run as 256, then 1', async () => {
    const dir = freshDir();
    for (let i = 0; i < 257; i++) writeFileSync(join(dir, `${i}.json`), wire(`c${i}`));
    const { engine, batches } = recordingEngine();
    assert.deepEqual(await ingestSpool(engine, dir, silentLog), { ingested: 257, rejected: 0 });
    assert.deepEqual(batches, [256, 1]);
    assert.deepEqual(readdirSync(dir), []);
  });

  test('at most 8 MiB of requests a batch: nine DELs of 1 MiB each are run as 8, then 1', async () => {
    const dir = freshDir();
    const MiB = 1024 * 1024;
    for (let i = 0; i < 9; i++) {
      const body = wire(`big${i}`);
      // Padded with JSON whitespace to exactly 1 MiB: eight of them are the batch's 8 MiB.
      writeFileSync(join(dir, `${i}.json`), body + ' '.repeat(MiB - body.length));
    }
    const { engine, batches } = recordingEngine();
    assert.deepEqual(await ingestSpool(engine, dir, silentLog), { ingested: 9, rejected: 0 });
    assert.deepEqual(batches, [8, 1]);
  });

  test('an entry listed but gone before its batch reads it is skipped: not counted, not moved aside', async () => {
    const dir = freshDir();
    const MiB = 1024 * 1024;
    for (let i = 0; i < 9; i++) {
      const body = wire(`big${i}`);
      writeFileSync(join(dir, `${i}.json`), body + ' '.repeat(MiB - body.length));
    }
    const first = deferred();
    const started: string[] = [];
    const { engine, batches } = recordingEngine((id) => {
      started.push(id);
      return first.promise;
    });
    const ingested = ingestSpool(engine, dir, silentLog);
    // The first batch (8 MiB) runs; the directory's read-ahead has listed the ninth name already.
    await until(() => started.length === 8);
    const ninth = [...Array(9).keys()].find((i) => !started.includes(`big${i}`));
    rmSync(join(dir, `${ninth}.json`));
    first.resolve();
    assert.deepEqual(await ingested, { ingested: 8, rejected: 0 });
    assert.deepEqual(batches, [8]);
    assert.deepEqual(readdirSync(dir), [], 'no rejected/ made for a file that is simply gone');
  });
});

describe('the start-up holds at the edge of the scan', () => {
  test('a DEL stamped in the millisecond the scan began, and listed by it, releases its container once done', async (t) => {
    const dir = freshDir();
    const T = 1_800_000_000_000;
    // The scan reads the clock once, when it begins: this millisecond.
    t.mock.method(Date, 'now', () => T);
    writeFileSync(join(dir, spoolName(T - 1000, 'slow', 1)), wire('slow'));
    writeFileSync(join(dir, spoolName(T, 'edge', 2)), wire('edge'));
    const slow = deferred();
    const { engine, done } = recordingEngine((id) => (id === 'slow' ? slow.promise : undefined));
    const drain = new SpoolDrain(engine, dir, silentLog);
    assert.equal(drain.scan(), 2);
    const hold = engine.spoolHold?.('edge');
    assert.ok(hold, 'edge is held');
    let released = false;
    void hold.then(() => (released = true));
    const drained = drain.start();
    // Its file is removed and its settling counted in one go: by the next turn the hold has answered.
    await until(() => done.includes('edge') && readdirSync(dir).length === 1);
    await new Promise((r) => setImmediate(r));
    assert.ok(released, 'edge is released while slow still drains');
    assert.equal(drain.pending, 1, "edge's DEL is counted done; slow's is not");
    assert.ok(engine.spoolHold?.('slow'), 'slow is still held');
    slow.resolve();
    assert.deepEqual(await drained, { ingested: 2, rejected: 0 });
    assert.equal(drain.pending, 0);
  });

  for (const [when, stampedMs] of [
    ['in that millisecond', 0],
    ['half a second before it (a writer stamps before it renames)', -500],
  ] as const)
    test(`a DEL stamped ${when} but written after the listing does not release a container the scan still holds`, async (t) => {
      const dir = freshDir();
      const T = 1_800_000_000_000;
      t.mock.method(Date, 'now', () => T);
      // Two ids of one container as spool names keep it (their first 64 characters).
      const listed = `${'e'.repeat(64)}listed`;
      const late = `${'e'.repeat(64)}late`;
      writeFileSync(join(dir, spoolName(T - 1000, listed.slice(0, 64), 1)), wire(listed));
      const gate = deferred();
      const { engine, done } = recordingEngine((id) => (id === listed ? gate.promise : undefined));
      const drain = new SpoolDrain(engine, dir, silentLog);
      assert.equal(drain.scan(), 1);
      // Renamed into the spool after the scan listed it.
      writeFileSync(join(dir, spoolName(T + stampedMs, late.slice(0, 64), 2)), wire(late));
      const hold = engine.spoolHold?.(listed);
      assert.ok(hold);
      let released = false;
      void hold.then(() => (released = true));
      const drained = drain.start();
      await until(() => done.includes(late) && readdirSync(dir).length === 1);
      await new Promise((r) => setImmediate(r));
      const early = released;
      gate.resolve();
      await drained;
      assert.equal(early, false, "released while the listed file's DEL still ran");
    });
});
