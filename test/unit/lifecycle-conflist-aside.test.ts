// on-term.ts conflistAside: the last resort of an uninstall on SIGTERM that failed. Only a steward
// config pointing at this daemon's socket goes aside, and never while someone holds the install lock.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { conflistAside } from '../../daemon/src/lifecycle/on-term.js';
import { tryLock } from '../../daemon/src/lifecycle/lock.js';

const log = pino({ level: 'silent' });
const base = mkdtempSync(join(tmpdir(), 'stw-aside-'));
after(() => rmSync(base, { recursive: true, force: true }));
let n = 0;

function node(conflist: object | string | undefined) {
  const dir = join(base, `n${n++}`);
  const confDir = join(dir, 'net.d');
  const stateDir = join(dir, 'state');
  mkdirSync(confDir, { recursive: true });
  mkdirSync(stateDir);
  if (conflist !== undefined)
    writeFileSync(
      join(confDir, '00-steward.conflist'),
      typeof conflist === 'string' ? conflist : JSON.stringify(conflist),
    );
  return { confDir, stateDir, ours: join(confDir, '00-steward.conflist') };
}

const steward = (socket?: string) => ({
  cniVersion: '1.0.0',
  name: 'steward',
  plugins: [{ type: 'steward', ...(socket !== undefined ? { socket } : {}), delegates: [] }],
});

describe('conflistAside', () => {
  it('moves aside a steward config naming this socket (or none: the default one), and only that', () => {
    const a = node(steward('/run/s.sock'));
    conflistAside(a.stateDir, a.confDir, '/run/s.sock', log);
    assert.equal(existsSync(a.ours), false);
    assert.equal(readdirSync(a.confDir).filter((f) => f.startsWith('00-steward.conflist.edited-')).length, 1);
    const d = node(steward());
    conflistAside(d.stateDir, d.confDir, '/run/steward/stewardd.sock', log);
    assert.equal(existsSync(d.ours), false);
  });

  it('leaves another daemon socket, another type, a file that does not parse, and no file at all', () => {
    for (const c of [
      steward('/run/other.sock'),
      { cniVersion: '1.0.0', name: 'x', plugins: [{ type: 'bridge' }] },
      '{"plugins": [',
    ]) {
      const x = node(c);
      conflistAside(x.stateDir, x.confDir, '/run/s.sock', log);
      assert.ok(existsSync(x.ours), JSON.stringify(c));
    }
    const none = node(undefined);
    conflistAside(none.stateDir, none.confDir, '/run/s.sock', log);
    assert.deepEqual(readdirSync(none.confDir), []);
  });

  it('leaves it while the install lock is held (its holder owns the files)', () => {
    const x = node(steward('/run/s.sock'));
    const held = tryLock(x.stateDir, 'test');
    assert.ok('held' in held);
    conflistAside(x.stateDir, x.confDir, '/run/s.sock', log);
    assert.ok(existsSync(x.ours));
    held.held.release();
  });
});
