// The alive beacon's writer (daemon/src/lifecycle/alive-beacon.ts): what each beat says, which
// STATUS verdicts it keeps, that a failure to write is told once and its recovery once, that
// stop() leaves no beacon behind, and that beats are written off the loop one at a time (the first
// in place, before the loop turns).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ALIVE_BEACON_MAX_NETWORKS, PROTOCOL_VERSION, type AliveBeacon as Beat } from '@cni-steward/shared';
import { AliveBeacon, type BeaconFiles } from '../../daemon/src/lifecycle/alive-beacon.js';

function setup(files?: BeaconFiles) {
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
    files,
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
  it('each beat says when, who, which protocol, whether ready, and the verdicts kept', async () => {
    const s = setup();
    try {
      await s.beacon.start();
      assert.deepEqual(s.read(), { at: 1000, pid: process.pid, protocol: PROTOCOL_VERSION, ready: true, status: {} });
      s.beacon.noteStatus(key(1), true);
      s.beacon.noteStatus(key(2), false);
      s.setReady(false);
      s.setNow(2_000);
      await s.beacon.beat();
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

  it('keeps well-formed keys only, the latest verdict of each, and only the most recently asked networks', async () => {
    const s = setup();
    try {
      for (const bad of [undefined, '', 'ABCDEF0123456789ABCDEF0123456789', key(1).slice(1), `${key(1)}0`, '../x'])
        s.beacon.noteStatus(bad, true);
      await s.beacon.beat();
      assert.deepEqual(s.read().status, {});
      for (let i = 0; i < ALIVE_BEACON_MAX_NETWORKS; i++) s.beacon.noteStatus(key(i), true);
      s.beacon.noteStatus(key(0), false); // asked again: the latest verdict, and now the most recent
      s.beacon.noteStatus(key(100), true); // one too many: the least recently asked (key 1) goes
      await s.beacon.beat();
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

  it('a beacon it cannot write is told once, and once again when it can', async () => {
    const s = setup();
    try {
      rmSync(join(s.dir, 'run'), { recursive: true });
      await s.beacon.beat();
      await s.beacon.beat();
      assert.deepEqual(
        s.logs.map(([l]) => l),
        ['warn'],
      );
      mkdirSync(join(s.dir, 'run'));
      await s.beacon.beat();
      await s.beacon.beat();
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
      await fast.start();
      fast.watch(new EventEmitter()); // a connection left open: a beat every 5 ms until stop()
      await new Promise((r) => setTimeout(r, 20));
      assert.ok(existsSync(`${s.socket}.alive`));
      // stop() resolves once a beat still in flight has landed and been removed again: checked
      // synchronously, a rename the thread pool finished meanwhile showed the beacon (a flake once in
      // a full unit run).
      await fast.stop();
      assert.equal(existsSync(`${s.socket}.alive`), false);
      fast.wake();
      await new Promise((r) => setTimeout(r, 30));
      assert.equal(existsSync(`${s.socket}.alive`), false, 'a beat after stop() wrote it again');
      fast.stop(); // twice: nothing left to remove, no error
    } finally {
      s.cleanup();
    }
  });
});

describe('what is left at the beacon temp name', () => {
  // A regression that opened the FIFO would hang, not fail: the timeout turns it into a failure.
  it(
    'a FIFO, a symlink or a directory there is replaced, never opened or written through',
    { timeout: 10_000 },
    async () => {
      const s = setup();
      try {
        const tmp = `${s.socket}.alive.tmp`;
        const target = join(s.dir, 'elsewhere');
        writeFileSync(target, 'keep');
        symlinkSync(target, tmp);
        await s.beacon.beat();
        assert.equal(readFileSync(target, 'utf8'), 'keep', 'written through the symlink');
        assert.equal(s.read().ready, true);
        execFileSync('mkfifo', [tmp]);
        s.setNow(2_000);
        await s.beacon.beat(); // would never settle if it opened the FIFO (open(2) waits for a reader)
        assert.equal(s.read().at, 2000);
        mkdirSync(join(tmp, 'inside'), { recursive: true });
        s.setNow(3_000);
        await s.beacon.beat();
        assert.equal(s.read().at, 3000, 'a directory at the temp name stopped the beats');
        assert.deepEqual(s.logs, []);
      } finally {
        s.cleanup();
      }
    },
  );
});

/**
 * The thread pool's file operations, each rename held until release() (one at a time); `entered`
 * resolves once a beat's rename has started (and is held).
 */
function heldRenames() {
  const renames: string[] = [];
  let release: () => void = () => {};
  let held = Promise.resolve();
  let entered: () => void = () => {};
  let enteredP = Promise.resolve();
  const files: BeaconFiles = {
    remove: (p) => rm(p, { recursive: true, force: true }),
    writeFile: (p, d, o) => writeFile(p, d, o),
    rename: async (from, to) => {
      renames.push(readFileSync(from, 'utf8'));
      entered();
      await held;
      await rename(from, to);
    },
  };
  return {
    files,
    renames,
    hold: () => {
      held = new Promise<void>((r) => (release = r));
      enteredP = new Promise<void>((r) => (entered = r));
    },
    entered: () => enteredP,
    release: () => release(),
  };
}

const ats = (beats: string[]) => beats.map((b) => (JSON.parse(b) as Beat).at);
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
async function until(what: string, ok: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!ok() && Date.now() < deadline) await sleep(2);
  assert.ok(ok(), what);
}

describe('beats off the loop', () => {
  it('the first beat is written in place: the beacon exists before the loop turns', async () => {
    const s = setup();
    try {
      let turned = false;
      setImmediate(() => (turned = true));
      await s.beacon.start();
      assert.equal(turned, false, 'the loop turned before the first beat was written');
      assert.equal(s.read().at, 1000);
      await s.beacon.stop();
    } finally {
      s.cleanup();
    }
  });

  it('a beat asked for while one is written follows it once, with the state when it is written', async () => {
    const r = heldRenames();
    const s = setup(r.files);
    try {
      await s.beacon.start();
      r.hold();
      s.setNow(2_000);
      const first = s.beacon.beat();
      // The rename waits; meanwhile the loop goes on, and more beats are asked for.
      await r.entered();
      assert.deepEqual(ats(r.renames), [2000]);
      s.setNow(3_000);
      const second = s.beacon.beat();
      s.setNow(4_000);
      const third = s.beacon.beat();
      s.setNow(5_000);
      s.setReady(false);
      assert.equal(s.read().at, 1000, 'the held beat landed early');
      r.release();
      await Promise.all([first, second, third]);
      // One more beat, not two, after the held one, written with the state of when it was written.
      assert.deepEqual(ats(r.renames), [2000, 5000]);
      assert.deepEqual([s.read().at, s.read().ready], [5000, false]);
      await s.beacon.stop();
    } finally {
      s.cleanup();
    }
  });

  it('start() while a beat is written: one writer, the beat after it in order', async () => {
    const r = heldRenames();
    const s = setup(r.files);
    try {
      r.hold();
      const early = s.beacon.beat();
      await r.entered();
      s.setNow(2_000);
      const started = s.beacon.start();
      r.release();
      await Promise.all([early, started]);
      assert.deepEqual(ats(r.renames), [1000, 2000]);
      assert.equal(s.read().at, 2000);
      assert.deepEqual(s.logs, []);
      await s.beacon.stop();
    } finally {
      s.cleanup();
    }
  });

  it('beats on wake(): at once a period after the last beat, else once when the period is up; none unasked', async () => {
    const r = heldRenames();
    const s = setup();
    const PERIOD = 40;
    let now = 1_000; // the wall clock the beats are dated by
    let mono = 0; // the monotonic one the period is counted on
    const beacon = new AliveBeacon(
      s.socket,
      () => true,
      { warn() {}, info() {} } as never,
      PERIOD,
      () => now,
      r.files,
      () => mono,
    );
    try {
      beacon.wake(); // before start(): nothing to vouch for yet
      await beacon.start(); // in place: not through r.files
      assert.equal(s.read().at, 1000);
      // Nothing wakes it: no beat however long (a timer beat every period cost an idle daemon CPU).
      now = 2_000;
      mono = 10 * PERIOD;
      await sleep(PERIOD * 3);
      assert.deepEqual(r.renames, [], 'a beat nobody asked for');
      // A period after the last: at once.
      beacon.wake();
      await until('the woken beat', () => r.renames.length === 1);
      assert.deepEqual(ats(r.renames), [2000]);
      // Within the period: many wakes, one beat, when the period is up, with the state of then.
      now = 3_000;
      for (let i = 0; i < 50; i++) beacon.wake();
      await new Promise((done) => setImmediate(done));
      assert.equal(r.renames.length, 1, 'a second beat within the period');
      now = 4_000;
      await until('the beat put off to the end of the period', () => r.renames.length === 2);
      assert.deepEqual(ats(r.renames), [2000, 4000]);
      await sleep(PERIOD * 3);
      assert.equal(r.renames.length, 2, 'the wakes asked for more than one beat');
      // A verdict wakes it too: the beacon holds it without a connection.
      mono += PERIOD;
      beacon.noteStatus(key(7), true);
      await until('the verdict written', () => s.read().status[key(7)] === true);
    } finally {
      await beacon.stop();
      s.cleanup();
    }
  });

  it('beats every period while a connection is open (a readiness change reaches its call), and stops when it closes', async () => {
    const r = heldRenames();
    const s = setup();
    const PERIOD = 20;
    let ready = true;
    let mono = 0;
    const beacon = new AliveBeacon(
      s.socket,
      () => ready,
      { warn() {}, info() {} } as never,
      PERIOD,
      Date.now,
      r.files,
      () => mono,
    );
    try {
      await beacon.start();
      mono = 10 * PERIOD;
      const connection = new EventEmitter();
      beacon.watch(connection);
      await until('the beat on the connection', () => r.renames.length === 1);
      // Open: a beat each period (the monotonic clock stands still, so each waits a full period).
      await until('beats while it is open', () => r.renames.length >= 4);
      ready = false;
      await until('the readiness change written while the call is open', () => s.read().ready === false);
      connection.emit('close');
      await sleep(PERIOD * 2); // a beat already put off may still land
      const after = r.renames.length;
      await sleep(PERIOD * 5);
      assert.equal(r.renames.length, after, 'beats after the last connection closed');
      // stop() with a beat put off: it never lands.
      const another = new EventEmitter();
      beacon.watch(another);
      await beacon.stop();
      await sleep(PERIOD * 3);
      assert.equal(existsSync(`${s.socket}.alive`), false, 'a beat after stop() wrote the beacon');
      beacon.watch(new EventEmitter()); // after stop(): nothing
      await sleep(PERIOD * 2);
      assert.equal(existsSync(`${s.socket}.alive`), false);
    } finally {
      await beacon.stop();
      s.cleanup();
    }
  });

  it('stop() while a beat is written: it resolves once that beat has landed and the beacon is gone', async () => {
    const r = heldRenames();
    const s = setup(r.files);
    try {
      await s.beacon.start();
      r.hold();
      const held = s.beacon.beat();
      await r.entered();
      let stopped = false;
      const stopping = s.beacon.stop().then(() => (stopped = true));
      assert.equal(existsSync(`${s.socket}.alive`), false);
      await new Promise((done) => setImmediate(done));
      assert.equal(stopped, false, 'stop() resolved before the beat being written landed');
      r.release();
      await Promise.all([held, stopping]);
      assert.equal(existsSync(`${s.socket}.alive`), false, 'a beat that landed after stop() left the beacon');
      await s.beacon.beat();
      assert.equal(existsSync(`${s.socket}.alive`), false, 'a beat after stop() wrote it');
      assert.deepEqual(s.logs, []);
    } finally {
      s.cleanup();
    }
  });

  it('a readiness check that throws fails the beat, told once, not the process', async () => {
    const s = setup();
    try {
      await s.beacon.start();
      s.setReady(true);
      const broken = new AliveBeacon(
        s.socket,
        () => {
          throw new Error('readiness unknown');
        },
        { warn: (_o: unknown, m: string) => void s.logs.push(['warn', m]), info() {} } as never,
        60_000,
      );
      await broken.beat();
      await broken.beat();
      assert.deepEqual(
        s.logs.map(([l]) => l),
        ['warn'],
      );
      assert.equal(s.read().at, 1000, 'the beacon changed');
      await broken.stop();
    } finally {
      s.cleanup();
    }
  });
});
