// Finding a plugin's executable (plugins/lookup.ts), and the code when none is there: an ADD's
// netconf naming a plugin the node lacks is a config error (7); a DEL's is "try again later" (11),
// so a binary missing for a while (an upgrade, a remounted hostPath) never makes a teardown
// "permanently failing" and abandoned (engine/retry-policy.ts treats 7 as permanent); a STATUS's is
// "not available" (50), since no ADD can be served.

import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { CniError, ErrorCode } from '@cni-steward/shared';
import { permanenceOf } from '../../daemon/src/engine/retry-policy.js';
import { findPlugin, missingPluginCode } from '../../daemon/src/plugins/lookup.js';

const dir = mkdtempSync(join(tmpdir(), 'steward-lookup-'));
after(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, 'here'), '#!/bin/sh\n');
chmodSync(join(dir, 'here'), 0o755);
writeFileSync(join(dir, 'not-executable'), '');

const failure = (fn: () => unknown): CniError => {
  try {
    fn();
  } catch (e) {
    return e as CniError;
  }
  assert.fail('expected it to throw');
};

describe('findPlugin', () => {
  test('finds an executable file in the first dir that has it', () => {
    assert.equal(findPlugin('here', ['/nonexistent', dir]), join(dir, 'here'));
  });

  test('missing (or not executable): code 7 by default, the code asked for otherwise, and it is no permanent failure then', () => {
    for (const type of ['gone', 'not-executable']) {
      const add = failure(() => findPlugin(type, [dir]));
      assert.equal(add.code, ErrorCode.InvalidConfig);
      assert.equal(add.message, `plugin type "${type}" is not in any plugin dir`);
      assert.equal(add.details, `searched: ${dir}`);
      const del = failure(() => findPlugin(type, [dir], ErrorCode.TryAgainLater));
      assert.equal(del.code, ErrorCode.TryAgainLater);
      assert.equal(del.message, add.message);
      assert.equal(permanenceOf(add, null), 'bad-input');
      assert.equal(permanenceOf(del, null), undefined, 'a DEL is retried until the binary is back');
    }
  });

  test('the code of a missing binary by command: 11 for DEL, 50 for STATUS, 7 for the rest', () => {
    const codes = ['ADD', 'CHECK', 'DEL', 'GC', 'STATUS', 'VERSION', 'constructor'].map(missingPluginCode);
    assert.deepEqual(codes, [7, 7, 11, 7, 50, 7, 7]);
  });

  test('a type that is no file name is code 7 whatever is asked for', () => {
    const e = failure(() => findPlugin('../etc/passwd', [dir], ErrorCode.TryAgainLater));
    assert.equal(e.code, ErrorCode.InvalidConfig);
  });
});
