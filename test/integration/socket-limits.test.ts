// Issue 28 item 5 (c, d): the CNI socket's listeners and descriptors. (d) Each re-listen after the
// socket file was deleted closes the listener it replaces: 20 deletions kept 21 listening sockets
// and their descriptors. (c) Connections the socket cannot take for want of file descriptors are
// logged and counted: libuv accepts and closes them on a reserve descriptor when accept(2) fails
// with EMFILE, silently; the daemon caps connections below RLIMIT_NOFILE and says what it drops.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync, unlinkSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv, sh } from '../helpers/env.js';

const env = new TestEnv('socklim');
after(() => env.close());

/** Inodes of the Unix sockets listening on `path` (a deleted path's listener still shows its name). */
function listeningOn(path: string): Set<string> {
  const rows = readFileSync('/proc/net/unix', 'utf8').split('\n').slice(1);
  const out = new Set<string>();
  for (const row of rows) {
    const f = row.trim().split(/\s+/);
    if (f[3] === '00010000' && f[7] === path && f[6] !== undefined) out.add(f[6]);
  }
  return out;
}

/** The socket inodes a process holds descriptors for, and how many descriptors it has. */
function fds(pid: number): { sockets: Set<string>; count: number } {
  const names = readdirSync(`/proc/${pid}/fd`);
  const sockets = new Set<string>();
  for (const n of names) {
    try {
      const l = readlinkSync(`/proc/${pid}/fd/${n}`);
      if (l.startsWith('socket:[')) sockets.add(l.slice(8, -1));
    } catch {
      /* closed meanwhile */
    }
  }
  return { sockets, count: names.length };
}

const healthy = (socket: string) =>
  new Promise<boolean>((resolve) => {
    const req = request({ socketPath: socket, path: '/healthz', agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.end();
  });

describe('the socket listeners and the descriptor limit', () => {
  it('20 deletions of the socket file: each re-listen closes the listener it replaces', async () => {
    const daemon = new Daemon(env, { name: 'relisten' });
    await daemon.start();
    const pid = daemon.proc!.pid!;
    const ours = () => [...listeningOn(daemon.socket)].filter((i) => fds(pid).sockets.has(i));
    assert.equal(ours().length, 1);
    const before = fds(pid).count;
    for (let i = 0; i < 20; i++) {
      unlinkSync(daemon.socket);
      await daemon.waitFor(`listening again after deletion ${i + 1}`, () => healthy(daemon.socket), 10_000);
    }
    assert.equal(ours().length, 1, 'one listening socket after 20 re-listens');
    const after = fds(pid).count;
    assert.ok(after <= before + 2, `descriptors ${before} before, ${after} after 20 re-listens`);
    const m = /^steward_socket_relistens_total\{why="deleted"\} (\d+)$/m.exec((await daemon.get('/metrics')).text);
    assert.equal(Number(m?.[1]), 20);
    await daemon.stop();
    assert.deepEqual(
      [...listeningOn(daemon.socket)].filter((i) => fds(pid).sockets.has(i)),
      [],
    );
  });

  it('connections past what the descriptor limit leaves are closed at once, logged and counted; the daemon keeps serving', async () => {
    const daemon = new Daemon(env, { name: 'fdlimit' });
    await daemon.start();
    const pid = daemon.proc!.pid!;
    // 192 descriptors: 64 left for connections after the 128 kept for the journal, spawner and the rest.
    sh('prlimit', ['--pid', String(pid), '--nofile=192:192']);
    await new Promise((r) => setTimeout(r, 1500)); // the limit is read again every second
    const held: Socket[] = [];
    // Connections the daemon closed (not us): each is one it refused. Waiting for them, not for the
    // first log line, keeps the count from depending on how much of the backlog it had accepted.
    let closedByDaemon = 0;
    let ours = false;
    try {
      for (let i = 0; i < 150; i++) {
        const s = connect(daemon.socket);
        s.on('error', () => undefined);
        s.on('close', () => {
          if (!ours) closedByDaemon++;
        });
        held.push(s);
      }
      // 150 connections, 64 taken: 86 refused.
      await daemon.waitFor('86 connections refused', () => closedByDaemon >= 86, 10_000);
      assert.match(
        readFileSync(daemon.logFile, 'utf8'),
        /connections to the socket closed at once for want of file descriptors/,
      );
      assert.ok(fds(pid).count < 192, 'the daemon kept descriptors free');
    } finally {
      ours = true;
      for (const s of held) s.destroy();
    }
    await daemon.waitFor('answering again', () => healthy(daemon.socket), 10_000);
    const text = (await daemon.get('/metrics')).text;
    const m = /^steward_connections_refused_total\{why="fd_cap"\} (\d+)$/m.exec(text);
    assert.ok(m && Number(m[1]) >= closedByDaemon, `refused: ${m?.[1]}, closed by the daemon: ${closedByDaemon}`);
    const line = readFileSync(daemon.logFile, 'utf8')
      .split('\n')
      .find((l) => l.includes('for want of file descriptors'));
    assert.match(line ?? '', /"level":"error".*"why":"fd_cap".*"maxConnections":64/);
    await daemon.stop();
  });
});
