// Install and uninstall stopped by a crash at every durable step. The crash is injected through
// the FileOps install/uninstall take: every write and removal (node files and the install record)
// is counted, and step N throws instead of (or half-way through, or right after) doing it. Then,
// on real files in a temp node tree: uninstall must leave the conf and bin dirs byte-identical to
// before the first install, and a re-run of install must converge on what an uncrashed run leaves.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { pino } from 'pino';
import { install, type InstallReport } from '../../daemon/src/lifecycle/install.js';
import { uninstall } from '../../daemon/src/lifecycle/uninstall.js';
import { atomicWrite, removeDurably, sha256 } from '../../daemon/src/lifecycle/files.js';
import { LOCK_FILE } from '../../daemon/src/lifecycle/lock.js';
import { readRecord, type FileOps } from '../../daemon/src/lifecycle/record.js';
import { snapshot, writeJson } from '../helpers/node-tree.js';

const log = pino({ level: 'silent' });
const base = mkdtempSync(join(tmpdir(), 'stw-crash-'));
after(() => rmSync(base, { recursive: true, force: true }));
// Outside every node tree and never listening: the conflist embeds them, so trees stay comparable.
const socket = join(base, 'absent.sock');
const spoolDir = join(base, 'spool');

class Crash extends Error {}
type Mode = 'before' | 'mid' | 'after';

/** Real file operations that crash at operation number `at` (0-based); `count()` is how many were attempted. */
function crashingOps(at: number, mode: Mode): { ops: FileOps; count: () => number } {
  let n = 0;
  const step = (doIt: () => void, half?: () => void) => {
    if (n++ !== at) return doIt();
    if (mode === 'after') doIt();
    if (mode === 'mid') half?.();
    throw new Crash(`crash at operation ${at} (${mode})`);
  };
  const ops: FileOps = {
    write: (p, d, m) =>
      step(
        () => atomicWrite(p, d, m),
        () => {
          // What atomicWrite leaves when it dies before the rename: half a temp file.
          const buf = typeof d === 'string' ? Buffer.from(d) : d;
          writeFileSync(join(dirname(p), `.${basename(p)}.0badc0de.tmp`), buf.subarray(0, buf.length >> 1), {
            mode: m,
          });
        },
      ),
    remove: (p) => {
      let removed = false;
      step(() => {
        removed = removeDurably(p);
      });
      return removed;
    },
  };
  return { ops, count: () => n };
}

interface Tree {
  root: string;
  state: string;
  shimV1: string;
  shimV2: string;
  conf: (name: string) => string;
  bin: (name: string) => string;
}

let trees = 0;
function tree(): Tree {
  const dir = join(base, `t${trees++}`);
  const root = join(dir, 'node');
  const conf = (name: string) => join(root, 'etc', name);
  const bin = (name: string) => join(root, 'opt', name);
  for (const d of [conf('net.d'), conf('net2.d'), bin('bin'), bin('bin2')]) mkdirSync(d, { recursive: true });
  for (const d of ['net.d', 'net2.d']) {
    writeJson(join(conf(d), '10-podnet.conflist'), {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [{ type: 'bridge', bridge: 'cni0' }],
    });
    writeFileSync(join(conf(d), 'README'), 'not a network config\n');
  }
  writeFileSync(join(bin('bin'), 'bridge'), "someone else's plugin\n", { mode: 0o755 });
  const shimV1 = join(dir, 'steward-v1');
  const shimV2 = join(dir, 'steward-v2');
  writeFileSync(shimV1, '#!/bin/sh\necho v1\n');
  writeFileSync(shimV2, '#!/bin/sh\necho v2\n');
  return { root, state: join(dir, 'state'), shimV1, shimV2, conf, bin };
}

/** Install or uninstall, crashing or not, must never leave the install lock behind. */
async function noLockLeft<T>(t: Tree, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } finally {
    assert.equal(existsSync(join(t.state, LOCK_FILE)), false, 'the install lock was left behind');
  }
}

function installWith(
  t: Tree,
  o: { confDir?: string; binDir?: string; shim?: string; ops?: FileOps } = {},
): Promise<InstallReport> {
  return noLockLeft(t, () =>
    install({
      cniBinDir: t.bin(o.binDir ?? 'bin'),
      cniConfDir: t.conf(o.confDir ?? 'net.d'),
      stateDir: t.state,
      shim: o.shim ?? t.shimV1,
      socket,
      spoolDir,
      force: false,
      log,
      ...(o.ops ? { ops: o.ops } : {}),
    }),
  );
}

function uninstallWith(t: Tree, ops?: FileOps) {
  return noLockLeft(t, () =>
    uninstall({
      stateDir: t.state,
      dbPath: join(t.state, 'absent.db'),
      drainTimeoutMs: 100,
      purge: false,
      log,
      ...(ops ? { ops } : {}),
    }),
  );
}

/** The operations `run` performs, in order (real ones, nothing crashes). */
async function operationsOf(run: (ops: FileOps) => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  await run({
    write: (p, d, m) => {
      seen.push(`write ${p}`);
      atomicWrite(p, d, m);
    },
    remove: (p) => {
      seen.push(`remove ${p}`);
      return removeDurably(p);
    },
  });
  return seen;
}

/**
 * Moves an install to --cni-conf-dir net2.d and crashes once the new conflist is written but the
 * old one not yet removed (the crash point is found on an identical tree first).
 */
async function moveCrashingBeforeRetirement(t: Tree): Promise<void> {
  const probe = tree();
  await installWith(probe);
  const at = (await operationsOf((ops) => installWith(probe, { confDir: 'net2.d', ops }))).indexOf(
    `remove ${join(probe.conf('net.d'), '00-steward.conflist')}`,
  );
  assert.ok(at > 0);
  assert.equal(await crashed(() => installWith(t, { confDir: 'net2.d', ops: crashingOps(at, 'before').ops })), true);
  assert.ok(existsSync(join(t.conf('net2.d'), '00-steward.conflist')));
  assert.ok(existsSync(join(t.conf('net.d'), '00-steward.conflist')));
  assert.equal(readRecord(t.state)?.retired?.[0]?.path, join(t.conf('net.d'), '00-steward.conflist'));
}

/** The node as it should be after uninstall: as before the first install, with only others' changes applied. */
function pristine(s: { othersChange?: (t: Tree) => void }): Record<string, string> {
  const t = tree();
  s.othersChange?.(t);
  return snapshot(t.root);
}

interface Scenario {
  name: string;
  /** Installs that completed before the one that crashes (and any changes others made in between). */
  earlier: (t: Tree) => Promise<void>;
  /** What others change on the node in `earlier`: still there after uninstall. */
  othersChange?: (t: Tree) => void;
  /** The install that crashes. */
  crashing: (t: Tree, ops?: FileOps) => Promise<InstallReport>;
}

const primaryChanged = (t: Tree) =>
  writeJson(join(t.conf('net.d'), '10-podnet.conflist'), {
    cniVersion: '1.0.0',
    name: 'podnet',
    plugins: [{ type: 'bridge', bridge: 'cni0', mtu: 1400 }],
  });

const scenarios: Scenario[] = [
  { name: 'first install', earlier: async () => undefined, crashing: (t, ops) => installWith(t, { ops }) },
  {
    name: 'upgrade: new shim, changed primary',
    earlier: async (t) => {
      await installWith(t);
      primaryChanged(t);
    },
    othersChange: primaryChanged,
    crashing: (t, ops) => installWith(t, { shim: t.shimV2, ops }),
  },
  {
    name: '--cni-conf-dir changed',
    earlier: async (t) => {
      await installWith(t);
    },
    crashing: (t, ops) => installWith(t, { confDir: 'net2.d', ops }),
  },
  {
    name: '--cni-bin-dir changed',
    earlier: async (t) => {
      await installWith(t);
    },
    crashing: (t, ops) => installWith(t, { binDir: 'bin2', ops }),
  },
  {
    name: 'both dirs and the shim changed',
    earlier: async (t) => {
      await installWith(t);
    },
    crashing: (t, ops) => installWith(t, { confDir: 'net2.d', binDir: 'bin2', shim: t.shimV2, ops }),
  },
];

/** Runs `f` with a crash at every operation in turn, each on a fresh tree, until a run completes. */
async function everyCrashPoint(mode: Mode, f: (at: number, ops: FileOps) => Promise<boolean>): Promise<number> {
  for (let at = 0; at < 100; at++) {
    const c = crashingOps(at, mode);
    if (await f(at, c.ops)) return at; // completed: no operation left to crash at
  }
  throw new Error('never completed');
}

async function crashed(run: () => Promise<unknown>): Promise<boolean> {
  try {
    await run();
    return false;
  } catch (e) {
    if (e instanceof Crash) return true;
    throw e;
  }
}

describe('install crashing at any point', () => {
  for (const s of scenarios) {
    for (const mode of ['before', 'mid', 'after'] as const) {
      it(`${s.name}, crash ${mode} a write: uninstall restores the node byte for byte`, async () => {
        let points = 0;
        for (let at = 0; ; at++) {
          assert.ok(at < 100, 'install never completed');
          const original = pristine(s);
          const t = tree();
          await s.earlier(t);
          const c = crashingOps(at, mode);
          const didCrash = await crashed(() => s.crashing(t, c.ops));
          const r = await uninstallWith(t);
          assert.deepEqual(r.refused, [], `crash at operation ${at}`);
          assert.deepEqual(
            snapshot(t.root),
            original,
            `crash at operation ${at} (${mode}) left the node changed after uninstall`,
          );
          assert.equal(existsSync(join(t.state, 'install.json')), false);
          if (!didCrash) break;
          points++;
        }
        assert.ok(points >= 4, `only ${points} crash points`);
      });
    }

    it(`${s.name}: after a crash at any point, installing again converges on the uncrashed result`, async () => {
      const clean = tree();
      await s.earlier(clean);
      await s.crashing(clean);
      const want = {
        node: snapshot(clean.root),
        record: readFileSync(join(clean.state, 'install.json'), 'utf8').replaceAll(clean.root, '<root>'),
      };
      for (const mode of ['before', 'mid', 'after'] as const) {
        await everyCrashPoint(mode, async (at, ops) => {
          const t = tree();
          await s.earlier(t);
          const didCrash = await crashed(() => s.crashing(t, ops));
          await s.crashing(t);
          const got = {
            node: snapshot(t.root),
            record: readFileSync(join(t.state, 'install.json'), 'utf8').replaceAll(t.root, '<root>'),
          };
          assert.deepEqual(got, want, `crash at operation ${at} (${mode})`);
          return !didCrash;
        });
      }
    });
  }
});

describe('uninstall crashing at any point', () => {
  it('a second uninstall finishes the job', async () => {
    for (const mode of ['before', 'mid', 'after'] as const) {
      for (let at = 0; ; at++) {
        assert.ok(at < 100);
        const t = tree();
        const original = snapshot(t.root);
        await installWith(t);
        await moveCrashingBeforeRetirement(t);
        const c = crashingOps(at, mode);
        let didCrash = false;
        try {
          await uninstallWith(t, c.ops);
        } catch (e) {
          if (!(e instanceof Crash)) throw e;
          didCrash = true;
        }
        assert.deepEqual((await uninstallWith(t)).refused, []);
        assert.deepEqual(snapshot(t.root), original, `uninstall crash at operation ${at} (${mode})`);
        if (!didCrash) break;
      }
    }
  });
});

describe('the record is ahead of every write', () => {
  it('a crash between the record write and the conflist write leaves both shas accepted (incident 2)', async () => {
    const original = pristine({ othersChange: primaryChanged });
    const t = tree();
    await installWith(t);
    const oldConflist = readFileSync(join(t.conf('net.d'), '00-steward.conflist'));
    primaryChanged(t);
    // Same shim: operation 0 is the record naming the new conflist sha, operation 1 the conflist itself.
    assert.equal(await crashed(() => installWith(t, { ops: crashingOps(1, 'before').ops })), true);
    assert.deepEqual(
      readFileSync(join(t.conf('net.d'), '00-steward.conflist')),
      oldConflist,
      'the crash came before the conflist write',
    );
    const rec = readRecord(t.state)!;
    assert.equal(rec.conflist?.previous, sha256(oldConflist));
    assert.notEqual(rec.conflist?.sha256, sha256(oldConflist));
    const r = await uninstallWith(t);
    assert.deepEqual(r.refused, []);
    assert.deepEqual(snapshot(t.root), original);
  });

  it('a crash between the record write and the shim write: the record already names the shim', async () => {
    const t = tree();
    const original = snapshot(t.root);
    assert.equal(await crashed(() => installWith(t, { ops: crashingOps(1, 'mid').ops })), true);
    assert.equal(existsSync(join(t.bin('bin'), 'steward')), false);
    assert.equal(readRecord(t.state)?.shim.path, join(t.bin('bin'), 'steward'));
    assert.notDeepEqual(snapshot(t.root), original, 'a half-written temp file was left');
    await uninstallWith(t);
    assert.deepEqual(snapshot(t.root), original);
  });

  it('once install is done, the record holds one sha per file and nothing retired', async () => {
    const t = tree();
    await installWith(t);
    await installWith(t, { confDir: 'net2.d', binDir: 'bin2', shim: t.shimV2 });
    const rec = readRecord(t.state)!;
    assert.equal(rec.shim.previous, undefined);
    assert.equal(rec.conflist?.previous, undefined);
    assert.equal(rec.retired, undefined);
  });
});

describe('changed --cni-conf-dir / --cni-bin-dir', () => {
  it('install removes our files at the old paths once the new ones are written; uninstall leaves no orphan', async () => {
    const t = tree();
    const original = snapshot(t.root);
    await installWith(t);
    const r = await installWith(t, { confDir: 'net2.d', binDir: 'bin2' });
    assert.deepEqual(
      r.retired.removed.sort(),
      [join(t.bin('bin'), 'steward'), join(t.conf('net.d'), '00-steward.conflist')].sort(),
    );
    assert.equal(existsSync(join(t.conf('net.d'), '00-steward.conflist')), false);
    assert.equal(existsSync(join(t.bin('bin'), 'steward')), false);
    assert.ok(existsSync(join(t.conf('net2.d'), '00-steward.conflist')));
    assert.ok(existsSync(join(t.bin('bin2'), 'steward')));
    await uninstallWith(t);
    assert.deepEqual(snapshot(t.root), original);
  });

  it('an old file someone rewrote since is left in place, reported, and does not block uninstall', async () => {
    const t = tree();
    await installWith(t);
    const theirs = '{"cniVersion":"1.0.0","name":"hand-edited","plugins":[{"type":"bridge"}]}\n';
    writeFileSync(join(t.conf('net.d'), '00-steward.conflist'), theirs);
    const r = await installWith(t, { confDir: 'net2.d' });
    assert.deepEqual(r.retired.removed, []);
    assert.equal(r.retired.kept.length, 1);
    assert.equal(r.retired.kept[0]!.path, join(t.conf('net.d'), '00-steward.conflist'));
    const u = await uninstallWith(t);
    assert.deepEqual(u.refused, []);
    assert.equal(readFileSync(join(t.conf('net.d'), '00-steward.conflist'), 'utf8'), theirs);
    assert.equal(existsSync(join(t.conf('net2.d'), '00-steward.conflist')), false);
  });

  it('moving back to a dir whose files are still recorded as retired takes them over', async () => {
    const t = tree();
    const original = snapshot(t.root);
    await installWith(t);
    await moveCrashingBeforeRetirement(t);
    assert.equal(readRecord(t.state)?.retired?.[0]?.path, join(t.conf('net.d'), '00-steward.conflist'));
    const back = await installWith(t, { confDir: 'net.d' });
    assert.equal(back.conflist.status, 'unchanged');
    assert.deepEqual(back.retired.removed, [join(t.conf('net2.d'), '00-steward.conflist')]);
    await uninstallWith(t);
    assert.deepEqual(snapshot(t.root), original);
  });
});
