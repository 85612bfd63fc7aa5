// GET /v1/attachments over a large journal (daemon/src/routes/status.ts): the answer is written a
// chunk of rows at a time with the event loop let go in between (in one turn, 100,000 rows held
// every CNI request, probe and STATUS for seconds), and the chunks make one JSON array of every row,
// in order, with its steps. A real Store on a temp file, the route on a bare Fastify. Root-free.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Fastify from 'fastify';

import type { AppDeps } from '../../daemon/src/routes/deps.js';
import { statusRoutes } from '../../daemon/src/routes/status.js';
import { populateJournal } from '../../daemon/src/store/populate.js';
import { Store } from '../../daemon/src/store/store.js';

const root = mkdtempSync(join(tmpdir(), 'steward-attachments-route-'));
after(() => rmSync(root, { recursive: true, force: true }));

const conf = {
  cniVersion: '1.0.0',
  name: 'net',
  type: 'steward',
  delegates: [{ name: 'd', cniVersion: '1.0.0', plugins: [{ type: 'bridge' }] }],
};

async function appOver(count: number) {
  const db = join(root, `j-${count}.db`);
  if (count > 0) populateJournal(db, count, 'boot-1', conf);
  const store = new Store(db);
  const app = Fastify();
  await statusRoutes(app, { journal: store } as unknown as AppDeps);
  return { app, store };
}

describe('GET /v1/attachments', () => {
  test('every row of a large answer, in order, each with its steps, as one JSON array; the loop turns while it is written', async () => {
    const { app, store } = await appOver(1_201);
    try {
      let turns = 0;
      let counting = true;
      const count = () => {
        turns++;
        if (counting) setImmediate(count);
      };
      setImmediate(count);
      const r = await app.inject({ method: 'GET', url: '/v1/attachments?limit=5000' });
      counting = false;
      assert.equal(r.statusCode, 200);
      assert.match(String(r.headers['content-type']), /^application\/json/);
      const rows = r.json() as Array<{ id: number; containerId: string; state: string; steps: unknown[] }>;
      const want = store.listAttachments({ limit: 5000 });
      assert.equal(rows.length, 1_201);
      assert.deepEqual(
        rows.map((a) => a.id),
        want.map((a) => a.id),
      );
      for (const a of rows) {
        assert.equal(a.state, 'added');
        assert.equal(a.steps.length, 1);
      }
      // 1,201 rows are five chunks of 250: four times the loop let go in between.
      assert.ok(turns >= 4, `the loop turned ${turns} times while the answer was written`);
    } finally {
      await app.close();
      store.close();
    }
  });

  test('a row of a later chunk is shown as it is when written, with its steps; one pruned meanwhile is left out', async () => {
    const db = join(root, 'changing.db');
    populateJournal(db, 600, 'boot-1', conf);
    const store = new Store(db);
    const ids = store.listAttachments({ limit: 1000 }).map((a) => a.id);
    // ids are newest first: the last two are in the third chunk.
    const [changed, pruned] = [ids[550]!, ids[599]!];
    const journal = {
      getAttachment: (id: number) => store.getAttachment(id),
      stepsOf: (id: number) => store.stepsOf(id),
      // Once the rows are listed, before the next turn: one torn down, one gone.
      listAttachments: (f: Parameters<Store['listAttachments']>[0]) => {
        const rows = store.listAttachments(f);
        setImmediate(() => {
          store.setAttachmentState(changed, 'deleting');
          for (const s of store.stepsOf(changed)) store.setStepDeleting(s.id);
          // As pruning does (a tombstone past its age): the row and its steps gone.
          const { db } = store as unknown as { db: { exec: (sql: string) => void } };
          db.exec(`DELETE FROM steps WHERE attachment_id = ${pruned}; DELETE FROM attachments WHERE id = ${pruned}`);
        });
        return rows;
      },
    };
    const app = Fastify();
    await statusRoutes(app, { journal } as unknown as AppDeps);
    try {
      const r = await app.inject({ method: 'GET', url: '/v1/attachments?limit=1000' });
      const rows = r.json() as Array<{ id: number; state: string; steps: Array<{ state: string }> }>;
      assert.equal(rows.length, 599);
      assert.ok(!rows.some((a) => a.id === pruned));
      const c = rows.find((a) => a.id === changed)!;
      assert.equal(c.state, 'deleting');
      assert.deepEqual(
        c.steps.map((s) => s.state),
        ['deleting'],
      );
    } finally {
      await app.close();
      store.close();
    }
  });

  test('an exact multiple of a chunk, one row, and none are well-formed arrays too', async () => {
    for (const [count, limit] of [
      [500, 500],
      [1, 10],
      [0, 10],
    ] as const) {
      const { app, store } = await appOver(count);
      try {
        const r = await app.inject({ method: 'GET', url: `/v1/attachments?limit=${limit}` });
        assert.equal(r.statusCode, 200);
        assert.equal((r.json() as unknown[]).length, count, `${count} rows`);
      } finally {
        await app.close();
        store.close();
      }
    }
  });
});
