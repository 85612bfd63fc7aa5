// routes/admission.ts on a real HTTP server over a Unix socket, without root: what a hostile client
// does to its counters and queue. Pipelined requests queued behind a held one whose client goes away
// release what they took (a queued response never emits 'close'); a DEL of a container whose ADD is
// held is admitted at once and does not take the engine DEL slot; a held engine DEL does not hold up
// a tombstoned one.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CNI_ROUTE, hintHeaders } from '@cni-steward/shared';
import { Admission } from '../../daemon/src/routes/admission.js';

const dir = mkdtempSync(join(tmpdir(), 'steward-admission-release-'));
const socket = join(dir, 's.sock');
let server: Server;
let admission: Admission;
/** Requests the test holds open by container id, answered when it says so. */
const held = new Map<string, Array<(text: string) => void>>();
const served: string[] = [];

before(async () => {
  admission = new Admission({
    maxDels: 2,
    maxDelsWhileAdding: 1,
    tombstonePaceMs: 1,
    priorityMs: 50,
    maxBodyBytes: 1 << 20,
    isTombstoned: (h) => h.command === 'DEL' && (h.containerId ?? '').startsWith('tomb'),
    serve: (body, hints) => {
      const cid = (body as { env: { CNI_CONTAINERID: string } }).env.CNI_CONTAINERID;
      served.push(`${hints.command} ${cid}`);
      if (!cid.startsWith('hold')) return Promise.resolve('{}');
      return new Promise<string>((resolve) => held.set(cid, [...(held.get(cid) ?? []), resolve]));
    },
  });
  server = createServer(
    admission.listener((_req, res) => {
      res.writeHead(500).end();
    }),
  );
  await new Promise<void>((r) => server.listen(socket, r));
});
after(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

function request(command: string, containerId: string): string {
  const env = { CNI_COMMAND: command, CNI_CONTAINERID: containerId, CNI_IFNAME: 'eth0' };
  const config = { cniVersion: '1.0.0', name: 'net', type: 'steward' };
  const body = JSON.stringify({ env, config });
  const headers = { ...hintHeaders(env, config), 'content-type': 'application/json', 'content-length': body.length };
  return (
    `POST ${CNI_ROUTE} HTTP/1.1\r\nHost: x\r\n` +
    Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('') +
    `\r\n${body}`
  );
}

/** Writes requests on one connection; resolves with the statuses answered by the time it closes or `n` arrive. */
function send(text: string) {
  const sock = connect(socket);
  let got = '';
  sock.on('data', (b: Buffer) => (got += b.toString('latin1')));
  sock.on('error', () => undefined);
  sock.write(text);
  return {
    sock,
    statuses: () => [...got.matchAll(/^HTTP\/1\.1 (\d+)/gm)].map((m) => Number(m[1])),
  };
}

async function until(what: string, cond: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), what);
}

const atRest = () => {
  const s = admission.stats;
  return s.othersInFlight === 0 && s.delsAdmitted === 0 && s.delsWaiting === 0;
};

describe('a hostile client and the admission counters', () => {
  it('pipelined requests behind a held ADD, then the client goes away: every counter is released', async () => {
    const c = send(request('ADD', 'hold-p1') + request('ADD', 'p2') + request('DEL', 'p3') + request('DEL', 'tomb-p4'));
    await until('the held ADD served, the rest read', () => held.has('hold-p1') && served.includes('ADD p2'));
    assert.ok(admission.stats.othersInFlight >= 1);
    c.sock.destroy();
    await until(`counters at rest (${JSON.stringify(admission.stats)})`, atRest);
    held.get('hold-p1')?.[0]?.('{}');
    held.delete('hold-p1');
    await until('ADD priority over', () => !admission.stats.addPriority);
  });

  it('a DEL of a container whose ADD is held is admitted at once, not in the engine DEL slot', async () => {
    const add = send(request('ADD', 'hold-a'));
    await until('the ADD held', () => held.has('hold-a'));
    const del = send(request('DEL', 'hold-a'));
    await until('the DEL admitted and served', () => (held.get('hold-a') ?? []).length === 2);
    // The one engine DEL slot (1 while adding) is still free for another container's DEL.
    const other = send(request('DEL', 'other-b'));
    await until('the other DEL answered', () => other.statuses().length === 1);
    assert.deepEqual(other.statuses(), [200]);
    for (const answer of held.get('hold-a') ?? []) answer('{}');
    held.delete('hold-a');
    await until('ADD and DEL answered', () => add.statuses().length === 1 && del.statuses().length === 1);
    for (const c of [add, del, other]) c.sock.destroy();
    await until('counters at rest', atRest);
  });

  it('a held engine DEL does not hold up a tombstoned DEL behind it', async () => {
    const add = send(request('ADD', 'hold-x'));
    await until('the ADD held', () => held.has('hold-x'));
    const slow = send(request('DEL', 'hold-y')); // takes the one engine DEL slot while adding
    await until('the engine DEL held', () => held.has('hold-y'));
    const waiting = send(request('DEL', 'z')); // waits for that slot
    await until('an engine DEL waiting', () => admission.stats.delsWaiting === 1);
    const tomb = send(request('DEL', 'tomb-z'));
    await until('the tombstoned DEL answered', () => tomb.statuses().length === 1);
    assert.equal(admission.stats.delsWaiting, 1, 'the engine DEL still waits');
    for (const cid of ['hold-x', 'hold-y']) for (const answer of held.get(cid) ?? []) answer('{}');
    held.clear();
    await until('all answered', () => [add, slow, waiting].every((c) => c.statuses().length === 1));
    for (const c of [add, slow, waiting, tomb]) c.sock.destroy();
    await until('counters at rest', atRest);
  });
});
