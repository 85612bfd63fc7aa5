// GET /v1/audit with clients that hang up (routes/audit.ts over audit/auditor.ts): a request whose
// client left before its pass's turn runs no pass, and past MAX_WAITING_PASSES waiting a new one is
// 503 with the reason. Real HTTP on a Unix socket in a temp dir, the real Auditor on an empty node.
// Root-free.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Fastify from 'fastify';
import pino from 'pino';
import { Auditor, MAX_WAITING_PASSES } from '../../daemon/src/audit/auditor.js';
import type { AuditDeps } from '../../daemon/src/audit/run.js';
import { auditRoutes } from '../../daemon/src/routes/audit.js';

const dir = mkdtempSync(join(tmpdir(), 'stw-audit-route-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const log = pino({ level: 'silent' });

/** An auditor whose first pass waits for `open`, and the count of passes that ran. */
function gatedAuditor() {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const state = { asks: 0 };
  const deps: AuditDeps = {
    journal: { attachmentsInState: () => [], stepsOf: () => [] },
    teardown: async () => ({ done: true }),
    run: async () => undefined,
    listSandboxes: async () => {
      state.asks += 1;
      if (state.asks === 1) await gate;
      return [];
    },
    runtime: () => ({ reachable: true, endpoint: 'unix:///x' }),
    leaseDirs: [join(dir, 'networks')],
    cacheDir: join(dir, 'results'),
    log,
  };
  return { auditor: new Auditor(deps, log), open, state };
}

async function serve(auditor: Auditor, name: string) {
  const app = Fastify();
  await auditRoutes(app, { audit: (opts, gone) => auditor.run(opts, gone) });
  const socket = join(dir, `${name}.sock`);
  await app.listen({ path: socket });
  return { app, socket };
}

function get(socket: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket, path: '/v1/audit' }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A GET /v1/audit whose client hangs up once the request is written. */
function getAndHangUp(socket: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = connect(socket, () => c.end('GET /v1/audit HTTP/1.1\r\nHost: x\r\n\r\n', () => resolve()));
    c.on('error', reject);
  });
}

const until = async (what: () => boolean) => {
  for (const end = Date.now() + 5000; !what() && Date.now() < end;) await new Promise((r) => setTimeout(r, 5));
  assert.ok(what());
};

describe('GET /v1/audit, clients that do not wait', () => {
  it('a request whose client hung up before its turn runs no pass; one still waiting gets its report', async () => {
    const { auditor, open, state } = gatedAuditor();
    const { app, socket } = await serve(auditor, 'gone');
    try {
      const first = get(socket);
      await until(() => state.asks === 1);
      for (let i = 0; i < 3; i++) await getAndHangUp(socket);
      await new Promise((r) => setTimeout(r, 100)); // the server sees them close
      const last = get(socket);
      await new Promise((r) => setTimeout(r, 50));
      open();
      assert.equal((await first).status, 200);
      const answer = await last;
      assert.equal(answer.status, 200, answer.body);
      assert.ok(Array.isArray((JSON.parse(answer.body) as { orphans: unknown[] }).orphans));
      assert.equal(state.asks, 2, 'the three passes whose clients left were not run');
    } finally {
      await app.close();
    }
  });

  it(`past ${MAX_WAITING_PASSES} waiting, a new request is 503 with the reason`, async () => {
    const { auditor, open, state } = gatedAuditor();
    const { app, socket } = await serve(auditor, 'full');
    try {
      const running = get(socket);
      await until(() => state.asks === 1);
      const waiting = Array.from({ length: MAX_WAITING_PASSES }, () => get(socket));
      await new Promise((r) => setTimeout(r, 100));
      const refused = await get(socket);
      assert.equal(refused.status, 503, refused.body);
      assert.match(
        (JSON.parse(refused.body) as { error: string }).error,
        new RegExp(`^${MAX_WAITING_PASSES} audit passes are already waiting`),
      );
      open();
      for (const r of [running, ...waiting]) assert.equal((await r).status, 200);
      assert.equal(state.asks, 1 + MAX_WAITING_PASSES);
    } finally {
      await app.close();
    }
  });
});
