// The alive beacon's writer (daemon/src/lifecycle/alive-beacon.ts): what each beat says, which
// STATUS verdicts it keeps, that a failure to write is told once and its recovery once, and that
// stop() leaves no beacon behind.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ALIVE_BEACON_MAX_NETWORKS, PROTOCOL_VERSION, type AliveBeacon as Beat } from '@cni-steward/shared';
import { AliveBeacon } from '../../daemon/src/lifecycle/alive-beacon.js';

function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'steward-beacon-'));
  const socket = join(dir, 'run', 'stewardd.sock');
  mkdirSync(join(dir, 'run'));
  const logs: Array<[string, string]> = [];
  const log = {
    warn: (_o: unknown, m: string) => void logs.push(['warn', m]),
    info: (_o: unknown, m: string) => void logs.push(['info', m]),
  };
  let ready = true;
  let now = 1_000;
  const beacon = new AliveBeacon(
    socket,
    () => ready,
    log as never,
    60_000,
    () => now,
  );
  const read = () => JSON.parse(readFileSync(`${socket}.alive`, 'utf8')) as Beat;
  return {
    dir,
    socket,
    logs,
    beacon,
    read,
    setReady: (r: boolean) => (ready = r),
    setNow: (t: number) => (now = t),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

const key = (i: number) => i.toString(16).padStart(32, '0');

describe('the alive beacon', () => {
  it('each beat says when, who, which protocol, whether ready, and the verdicts kept', () => {
    const s = setup();
    try {
      s.beacon.start();
      assert.deepEqual(s.read(), { at: 1000, pid: process.pid, protocol: PROTOCOL_VERSION, ready: true, status: {} });
      s.beacon.noteStatus(key(1), true);
      s.beacon.noteStatus(key(2), false);
      s.setReady(false);
      s.setNow(2_000);
      s.beacon.beat();
      assert.deepEqual(s.read(), {
        at: 2000,
        pid: process.pid,
        protocol: PROTOCOL_VERSION,
        ready: false,
        status: { [key(1)]: true, [key(2)]: false },
      });
      s.beacon.stop();
    } finally {
      s.cleanup();
    }
  });

  it('keeps well-formed keys only, the latest verdict of each, and only the most recently asked networks', () => {
    const s = setup();
    try {
      for (const bad of [undefined, '', 'ABCDEF0123456789ABCDEF0123456789', key(1).slice(1), `${key(1)}0`, '../x'])
        s.beacon.noteStatus(bad, true);
      s.beacon.beat();
      assert.deepEqual(s.read().status, {});
      for (let i = 0; i < ALIVE_BEACON_MAX_NETWORKS; i++) s.beacon.noteStatus(key(i), true);
      s.beacon.noteStatus(key(0), false); // asked again: the latest verdict, and now the most recent
      s.beacon.noteStatus(key(100), true); // one too many: the least recently asked (key 1) goes
      s.beacon.beat();
      const status = s.read().status;
      assert.equal(Object.keys(status).length, ALIVE_BEACON_MAX_NETWORKS);
      assert.equal(status[key(0)], false);
      assert.equal(status[key(100)], true);
      assert.equal(key(1) in status, false);
      assert.equal(status[key(2)], true);
    } finally {
      s.cleanup();
    }
  });

  it('a beacon it cannot write is told once, and once again when it can', () => {
    const s = setup();
    try {
      rmSync(join(s.dir, 'run'), { recursive: true });
      s.beacon.beat();
      s.beacon.beat();
      assert.deepEqual(
        s.logs.map(([l]) => l),
        ['warn'],
      );
      mkdirSync(join(s.dir, 'run'));
      s.beacon.beat();
      s.beacon.beat();
      assert.deepEqual(
        s.logs.map(([l]) => l),
        ['warn', 'info'],
      );
      assert.equal(s.read().ready, true);
    } finally {
      s.cleanup();
    }
  });

  it('stop() removes the beacon and beats no more', async () => {
    const s = setup();
    try {
      const fast = new AliveBeacon(s.socket, () => true, { warn() {}, info() {} } as never, 5);
      fast.start();
      assert.ok(existsSync(`${s.socket}.alive`));
      fast.stop();
      assert.equal(existsSync(`${s.socket}.alive`), false);
      await new Promise((r) => setTimeout(r, 30));
      assert.equal(existsSync(`${s.socket}.alive`), false, 'a beat after stop() wrote it again');
      fast.stop(); // twice: nothing left to remove, no error
    } finally {
      s.cleanup();
    }
  });
});

describe('what is left at the beacon temp name', () => {
  it('a FIFO or a symlink there is replaced, never opened or written through', () => {
    const s = setup();
    try {
      const tmp = `${s.socket}.alive.tmp`;
      const target = join(s.dir, 'elsewhere');
      writeFileSync(target, 'keep');
      symlinkSync(target, tmp);
      s.beacon.beat();
      assert.equal(readFileSync(target, 'utf8'), 'keep', 'written through the symlink');
      assert.equal(s.read().ready, true);
      execFileSync('mkfifo', [tmp]);
      s.beacon.beat(); // would block this process in open(2) for good if it opened the FIFO
      assert.equal(s.read().ready, true);
      assert.deepEqual(s.logs, []);
    } finally {
      s.cleanup();
    }
  });
});
