// The spool dirs stewardd drains (daemon/src/spool-dirs.ts), without root: stale temp files a killed
// writer left are removed once older than the grace and counted in the metric, younger ones and
// anything that is not a regular temp file are left; the dir the install record names is drained
// beside --spool-dir (its containers held until then), and a named dir that cannot be drained is a
// readiness problem naming it.

import assert from 'node:assert/strict';
import {
  chmodSync,
  existsSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import type { CniError } from '@cni-steward/shared';
import { Metrics } from '../../daemon/src/metrics.js';
import { RETIRED_DIR_MS, SpoolDirs } from '../../daemon/src/spool-dirs.js';
import { spoolDirProblem } from '../../daemon/src/spool-dir-check.js';
import { STALE_TEMP_GRACE_MS } from '../../daemon/src/spool-temps.js';
import { Store } from '../../daemon/src/store/store.js';
import { NETNS, conf, deferred, req, setup } from '../helpers/engine-fakes.js';
import { fullDisk } from '../helpers/full-journal.js';
import { captureLog } from '../helpers/log-capture.js';

const root = mkdtempSync(join(tmpdir(), 'steward-spool-dirs-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => {
  const d = join(root, `d-${++n}`);
  mkdirSync(d);
  return d;
};

const chain = conf([{ type: 'one' }]);
const wire = (containerId: string) =>
  JSON.stringify({
    env: { CNI_COMMAND: 'DEL', CNI_CONTAINERID: containerId, CNI_NETNS: NETNS, CNI_IFNAME: 'eth0', CNI_PATH: '/x' },
    config: chain,
  });
const stem = (t: number, id: string, r: number) =>
  `${String(t).padStart(15, '0')}-${id}-${r.toString(16).padStart(8, '0')}`;
const tempName = (id: string, r = 1) => `.${stem(Date.now(), id, r)}.tmp`;
const spoolName = (id: string, r = 1) => `${stem(Date.now() - 1000, id, r)}.json`;

/** Sets a path's mtime (not following a link) this long in the past. */
const age = (path: string, ms: number) => {
  const t = (Date.now() - ms) / 1000;
  if (lstatSync(path).isSymbolicLink()) lutimesSync(path, t, t);
  else utimesSync(path, t, t);
};

/** An install record in stateDir naming spoolDir. */
function record(stateDir: string, spoolDir: string): void {
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(
    join(stateDir, 'install.json'),
    JSON.stringify({
      version: 1,
      state: 'installed',
      cniBinDir: '/opt/cni/bin',
      cniConfDir: '/etc/cni/net.d',
      socket: '/run/steward/stewardd.sock',
      spoolDir,
      shim: { path: '/opt/cni/bin/steward', sha256: 'x' },
    }),
  );
}

function spoolDirs(own: string, stateDir = freshDir(), over: Partial<ConstructorParameters<typeof SpoolDirs>[0]> = {}) {
  const s = setup();
  const metrics = new Metrics(new Store(':memory:'));
  const cap = captureLog();
  const dirs = new SpoolDirs({
    engine: s.engine,
    own,
    stateDir,
    log: cap.log,
    onTempRemoved: (k) => metrics.spoolTempFilesRemoved.inc(k),
    intervalMs: 20,
    ...over,
  });
  const removedTotal = async () => (await metrics.spoolTempFilesRemoved.get()).values[0]?.value ?? 0;
  return { ...s, dirs, cap, removedTotal };
}

describe('stale spool temp files', () => {
  test('a temp file older than the grace, or dated further ahead than it, is removed, counted and logged; a younger one is left for its writer', async () => {
    const dir = freshDir();
    const stale = tempName('killed', 1);
    const fresh = tempName('writing', 2);
    writeFileSync(join(dir, stale), '{"half":');
    writeFileSync(join(dir, fresh), '{"being written');
    // Written before the clock was stepped back an hour: dated ahead, it would never age into the grace.
    const ahead = tempName('before-a-clock-step', 3);
    const nearlyNow = tempName('slightly-ahead', 4);
    writeFileSync(join(dir, ahead), '{"half":');
    writeFileSync(join(dir, nearlyNow), '{"being written');
    age(join(dir, stale), STALE_TEMP_GRACE_MS + 60_000);
    age(join(dir, fresh), STALE_TEMP_GRACE_MS - 60_000);
    age(join(dir, ahead), -3_600_000);
    age(join(dir, nearlyNow), -60_000);
    const { dirs, cap, removedTotal } = spoolDirs(dir);
    assert.equal(await dirs.sweep(dir), 2);
    assert.deepEqual(readdirSync(dir).sort(), [fresh, nearlyNow].sort());
    assert.equal(await removedTotal(), 2);
    const line = cap.rows.find((r) => /stale spool temp files/.test(r.msg));
    assert.ok(line, 'a log line says so');
    assert.equal(line.level, 40);
    assert.deepEqual(
      [line.spoolDir, line.removed, [...(line.files as string[])].sort()],
      [dir, 2, [stale, ahead].sort()],
    );
    // Nothing more to remove: the counter stays, no second line.
    assert.equal(await dirs.sweep(dir), 0);
    assert.equal(await removedTotal(), 2);
  });

  test('a link named like a temp file is neither followed nor removed, however old', async () => {
    const dir = freshDir();
    const outside = join(freshDir(), 'precious');
    writeFileSync(outside, 'keep me');
    age(outside, STALE_TEMP_GRACE_MS * 2);
    const link = join(dir, tempName('link'));
    symlinkSync(outside, link);
    age(link, STALE_TEMP_GRACE_MS * 2);
    const { dirs, removedTotal } = spoolDirs(dir);
    assert.equal(await dirs.sweep(dir), 0);
    assert.ok(lstatSync(link).isSymbolicLink(), 'the link is still there');
    assert.equal(readFileSync(outside, 'utf8'), 'keep me');
    assert.equal(await removedTotal(), 0);
  });

  test('only regular files named like a spool temp file go: old spool files, directories and other names stay', async () => {
    const dir = freshDir();
    const keep = [spoolName('done'), '.not-a-spool-name.tmp', 'notes.tmp', tempName('adir')];
    writeFileSync(join(dir, keep[0]!), wire('done'));
    writeFileSync(join(dir, keep[1]!), '');
    writeFileSync(join(dir, keep[2]!), '');
    mkdirSync(join(dir, keep[3]!));
    for (const k of keep) age(join(dir, k), STALE_TEMP_GRACE_MS * 2);
    const { dirs } = spoolDirs(dir);
    assert.equal(await dirs.sweep(dir), 0);
    assert.deepEqual(readdirSync(dir).sort(), [...keep].sort());
  });

  test("the periodic round sweeps every drained dir, the install record's too", async () => {
    const own = freshDir();
    const stateDir = freshDir();
    const shims = freshDir();
    record(stateDir, shims);
    for (const d of [own, shims]) {
      const t = join(d, tempName('k'));
      writeFileSync(t, '');
      age(t, STALE_TEMP_GRACE_MS + 1000);
    }
    const { dirs, removedTotal } = spoolDirs(own, stateDir);
    dirs.scan();
    await dirs.tick();
    assert.deepEqual([readdirSync(own), readdirSync(shims)], [[], []]);
    assert.equal(await removedTotal(), 2);
  });
});

describe('the spool dirs drained', () => {
  test("the install record's spool dir is drained beside --spool-dir, and a container with DELs there waits for them", async () => {
    const own = freshDir();
    const stateDir = freshDir();
    const shims = freshDir();
    record(stateDir, shims);
    writeFileSync(join(own, spoolName('mine')), wire('mine'));
    writeFileSync(join(shims, spoolName('theirs')), wire('theirs'));
    const { dirs, engine, plugins } = spoolDirs(own, stateDir);
    assert.equal(dirs.scan(), 2);
    assert.deepEqual([...dirs.dirs()].sort(), [own, shims].sort());
    assert.deepEqual(dirs.problems(), []);
    assert.equal(dirs.pending, 2);
    // Held: the runtime sent the spooled DEL before this ADD.
    const add = engine.handle(req('ADD', 'theirs', chain));
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(plugins.of('ADD'), [], 'the ADD waits for the DEL spooled in the record dir');
    await dirs.start();
    await add;
    assert.equal(plugins.calls.at(-1), 'ADD one theirs');
    assert.deepEqual(plugins.of('DEL').sort(), ['DEL one mine', 'DEL one theirs']);
    assert.deepEqual([readdirSync(own), readdirSync(shims)], [[], []]);
    assert.equal(dirs.pending, 0);
    for (const id of ['mine', 'theirs', 'other'])
      assert.equal(engine.spoolHold?.(id), undefined, 'nothing held once every dir is drained');
    await dirs.stop();
  });

  test('a DEL spooled to the record dir while the daemon runs is ingested by the next round', async () => {
    const own = freshDir();
    const stateDir = freshDir();
    const shims = join(freshDir(), 'made-later');
    record(stateDir, shims);
    const { dirs, plugins } = spoolDirs(own, stateDir);
    dirs.scan();
    await dirs.start();
    mkdirSync(shims, { recursive: true }); // the round made it already (0700), as the shim would
    writeFileSync(join(shims, spoolName('late')), wire('late'));
    const deadline = Date.now() + 5000;
    while (readdirSync(shims).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await dirs.stop();
    assert.deepEqual(readdirSync(shims), []);
    assert.deepEqual(plugins.of('DEL'), ['DEL one late']);
  });

  test('a named spool dir that cannot be drained is a readiness problem naming it; a missing one is not', async () => {
    const own = freshDir();
    const stateDir = freshDir();
    const file = join(freshDir(), 'a-file');
    writeFileSync(file, '');
    record(stateDir, file);
    const { dirs } = spoolDirs(own, stateDir);
    dirs.scan();
    assert.deepEqual(dirs.dirs(), [own]);
    assert.equal(dirs.problems().length, 1);
    assert.match(
      dirs.problems()[0]!,
      new RegExp(
        `^spool dir ${file} \\(named by install record ${join(stateDir, 'install.json')}\\) cannot be drained: it is not a directory`,
      ),
    );
    // Fixed: a directory that does not exist yet (the shim makes it) is fine at the next round.
    rmSync(file);
    await dirs.tick();
    assert.deepEqual(dirs.problems(), []);
    assert.deepEqual(dirs.dirs(), [own, file]);
  });

  test('what makes a spool dir undrainable: not a directory, a link to nothing, a path through a file', () => {
    const base = freshDir();
    writeFileSync(join(base, 'f'), '');
    symlinkSync(join(base, 'nowhere'), join(base, 'dangling'));
    symlinkSync(freshDir(), join(base, 'linked'));
    assert.equal(spoolDirProblem(join(base, 'f')), 'it is not a directory');
    assert.equal(spoolDirProblem(join(base, 'dangling')), 'it is a symbolic link to a path that does not exist');
    assert.match(spoolDirProblem(join(base, 'f', 'spool')) ?? '', /^it cannot be read: ENOTDIR/);
    assert.equal(spoolDirProblem(join(base, 'linked')), undefined, 'a link to a directory is drained through');
    assert.equal(spoolDirProblem(join(base, 'not-yet')), undefined);
    assert.equal(spoolDirProblem(base), undefined);
  });

  test('an install record that cannot be read is a readiness problem', () => {
    const own = freshDir();
    const stateDir = freshDir();
    writeFileSync(join(stateDir, 'install.json'), '{not json');
    const { dirs } = spoolDirs(own, stateDir);
    dirs.scan();
    assert.deepEqual(dirs.dirs(), [own]);
    assert.match(
      dirs.problems()[0] ?? '',
      /^cannot read the install record .*install\.json for the spool dir the shim uses/,
    );
  });

  test('a dir the record no longer names is still drained for a while, then dropped', async () => {
    const own = freshDir();
    const stateDir = freshDir();
    const old = freshDir();
    const now = { t: 1_000_000 };
    record(stateDir, old);
    const { dirs } = spoolDirs(own, stateDir, { now: () => now.t });
    dirs.refresh();
    record(stateDir, own);
    now.t += RETIRED_DIR_MS - 60_000;
    assert.deepEqual(
      [...dirs.refresh()].sort(),
      [old, own].sort(),
      'a shim that read the old conflist may still spool there',
    );
    now.t += 2 * 60_000;
    assert.deepEqual(dirs.refresh(), [own]);
    assert.ok(existsSync(old));
  });

  test('a dir the record no longer names is no readiness problem: an install that fixes the name is ready at once', () => {
    const own = freshDir();
    const stateDir = freshDir();
    const file = join(freshDir(), 'a-file');
    writeFileSync(file, '');
    record(stateDir, file);
    const { dirs } = spoolDirs(own, stateDir);
    dirs.refresh();
    assert.equal(dirs.problems().length, 1);
    record(stateDir, own);
    dirs.refresh();
    assert.deepEqual(dirs.problems(), []);
    assert.deepEqual(dirs.dirs(), [own]);
  });
});

describe('DELs spooled while stewardd serves', () => {
  test('run before the next ADD of their container, so a reused container id is not torn down a second later', async () => {
    const own = freshDir();
    const { dirs, engine, plugins, store, cap } = spoolDirs(own);
    assert.equal(dirs.scan(), 0);
    await engine.handle(req('ADD', 'reused', chain));
    // The shim gave up on this DEL (stewardd slow past the DEL's bound) and spooled it; the runtime,
    // told it was done, ADDs the same container id again before the scheduler's next pass.
    writeFileSync(join(own, spoolName('reused')), wire('reused'));
    await engine.handle(req('ADD', 'reused', chain));
    assert.deepEqual(plugins.calls, ['ADD one reused', 'DEL one reused', 'ADD one reused']);
    assert.deepEqual(readdirSync(own), [], 'the spooled DEL is done and its file gone');
    assert.equal(store.currentAttachment({ containerId: 'reused', network: 'net', ifname: 'eth0' })!.state, 'added');
    assert.deepEqual(
      cap.of("the container's spooled DELs run before its request").map((r) => [r.containerId, r.spooled]),
      [['reused', 1]],
    );
  });

  test('another container’s request is not held by them, and the dir named by the install record counts too', async () => {
    const own = freshDir();
    const shims = freshDir();
    const stateDir = freshDir();
    record(stateDir, shims);
    const { dirs, engine, plugins } = spoolDirs(own, stateDir);
    assert.equal(dirs.scan(), 0);
    writeFileSync(join(shims, spoolName('elsewhere')), wire('elsewhere'));
    await engine.handle(req('ADD', 'bystander', chain));
    assert.deepEqual(plugins.calls, ['ADD one bystander']);
    assert.equal(readdirSync(shims).length, 1, 'left for its own container, or the next pass');
    await engine.handle(req('ADD', 'elsewhere', chain));
    assert.deepEqual(plugins.calls, ['ADD one bystander', 'DEL one elsewhere', 'ADD one elsewhere']);
    assert.deepEqual(readdirSync(shims), []);
  });
});

describe('a spool dir opened to others after the round that checked it', () => {
  test('is not read by the next request, nor by the scheduler gate: each checks it again as it starts', async () => {
    const own = freshDir();
    const { dirs, engine, plugins } = spoolDirs(own);
    assert.equal(dirs.scan(), 0);
    assert.equal(dirs.drainableNow(own), true);
    await engine.handle(req('ADD', 'opened', chain));
    writeFileSync(join(own, spoolName('opened')), wire('opened'));
    chmodSync(own, 0o777); // after the round: its verdict (drainable) is a second old
    assert.equal(dirs.drainableNow(own), false);
    await engine.handle(req('ADD', 'opened', chain)); // the same ADD again: answered from the journal
    assert.deepEqual(plugins.calls, ['ADD one opened'], "the dir's DEL was not run");
    assert.equal(readdirSync(own).length, 1, 'its file left unread');
    chmodSync(own, 0o700);
    assert.equal(dirs.drainableNow(own), true);
  });

  test('a named dir not there yet is made 0700 by the round, before anyone else can make it', async () => {
    const stateDir = freshDir();
    const shims = join(freshDir(), 'shim-spool');
    record(stateDir, shims);
    const { dirs } = spoolDirs(freshDir(), stateDir);
    dirs.scan();
    assert.equal(statSync(shims).mode & 0o777, 0o700);
    assert.equal(dirs.drainableNow(shims), true);
  });
});

describe('a spooled DEL whose file cannot be removed before its container’s request', () => {
  test('does not fail the request: its DEL is done, so it is served, the file told of and left for the next pass', async () => {
    const own = freshDir();
    const { dirs, engine, plugins, cap } = spoolDirs(own);
    assert.equal(dirs.scan(), 0);
    const file = join(own, spoolName('stuck'));
    writeFileSync(file, wire('stuck'));
    // While its DEL runs, the spool file becomes a directory: removing it then fails (EISDIR).
    plugins.on('one', (c) => {
      if (c.command === 'DEL') {
        rmSync(file);
        mkdirSync(file);
      }
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    assert.equal(await engine.handle(req('ADD', 'stuck', chain)), JSON.stringify({ cniVersion: '1.0.0' }));
    assert.deepEqual(plugins.calls, ['DEL one stuck', 'ADD one stuck']);
    const logged = cap.of('1 spooled DEL(s) done, but their files could not be removed; the next pass finds them done');
    assert.equal(logged.length, 1, JSON.stringify(cap.rows));
    assert.equal(logged[0]!.containerId, 'stuck');
    assert.match(String(logged[0]!.err), /EISDIR|EPERM/);
    rmSync(file, { recursive: true });
  });
});

describe('a spooled DEL whose teardown cannot be journaled (its file kept)', () => {
  test("refuses its container's ADD with code 11 until the DEL has run, then serves it after the DEL", async () => {
    const own = freshDir();
    const { dirs, engine, plugins, store } = spoolDirs(own);
    plugins.on('one', (c) => (c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined));
    await engine.handle(req('ADD', 'kept', chain));
    assert.equal(dirs.scan(), 0);
    let full = true;
    fullDisk(store, 'setAttachmentState', () => full);
    writeFileSync(join(own, spoolName('kept')), wire('kept'));
    for (const command of ['ADD', 'CHECK'])
      await assert.rejects(engine.handle(req(command, 'kept', chain)), (e: CniError) => {
        assert.equal(e.code, 11);
        assert.equal(
          e.message,
          '1 DEL(s) of this container spooled earlier could not be run yet (stewardd could not journal their teardown); they run first: try again later',
        );
        return true;
      });
    assert.deepEqual(plugins.calls, ['ADD one kept'], 'no plugin ran for the refused requests');
    assert.equal(readdirSync(own).length, 1);
    // Another container is not held by it.
    await engine.handle(req('ADD', 'other', chain));
    full = false;
    assert.equal(await engine.handle(req('ADD', 'kept', chain)), JSON.stringify({ cniVersion: '1.0.0' }));
    assert.deepEqual(plugins.calls, ['ADD one kept', 'ADD one other', 'DEL one kept', 'ADD one kept']);
    assert.deepEqual(readdirSync(own), []);
  });

  test('a dir the record no longer names is kept while it holds spooled DELs', () => {
    const own = freshDir();
    const stateDir = freshDir();
    const old = freshDir();
    const now = { t: Date.now() };
    record(stateDir, old);
    const { dirs } = spoolDirs(own, stateDir, { now: () => now.t });
    dirs.refresh();
    record(stateDir, own);
    const waiting = join(old, spoolName('waiting'));
    writeFileSync(waiting, wire('waiting'));
    now.t += RETIRED_DIR_MS + 60_000;
    assert.deepEqual([...dirs.refresh()].sort(), [old, own].sort(), 'its DEL is still to run');
    rmSync(waiting);
    assert.deepEqual(dirs.refresh(), [own]);
  });
});

describe('DELs spooled after the start-up scan, while its drain still runs', () => {
  test('run before their container’s next ADD too (the scan did not count them)', async () => {
    const own = freshDir();
    writeFileSync(join(own, spoolName('backlog')), wire('backlog'));
    const { dirs, engine, plugins } = spoolDirs(own);
    const slow = deferred();
    plugins.on('one', async (c) => {
      if (c.command === 'DEL' && c.containerId === 'backlog') await slow.promise;
      return c.command === 'ADD' ? { cniVersion: '1.0.0' } : undefined;
    });
    assert.equal(dirs.scan(), 1);
    const drained = dirs.start();
    // A shim gave up on a slow DEL of `late` after the scan; the runtime ADDs `late` again.
    writeFileSync(join(own, spoolName('late')), wire('late'));
    await engine.handle(req('ADD', 'late', chain));
    assert.deepEqual(
      plugins.calls.filter((c) => c.endsWith(' late')),
      ['DEL one late', 'ADD one late'],
    );
    slow.resolve();
    await drained;
    await dirs.stop();
  });
});
