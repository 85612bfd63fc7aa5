// spoolRequest (shared/src/spool.ts): the shim's and the degraded daemon's one way of writing a DEL
// to the spool. It makes the directories one level at a time; a spoolDir that cannot be made fails
// at once instead of looping (Node's recursive mkdir never returns for one under /proc).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spoolRequest } from '@cni-steward/shared';

describe('spoolRequest', () => {
  it('makes the missing directories (0700) and writes the body under a .json name, no temp file left', () => {
    const root = mkdtempSync(join(tmpdir(), 'stw-spool-'));
    try {
      const dir = join(root, 'a', 'b');
      const file = spoolRequest(dir, 'c0ffee', '{"env":{}}');
      assert.equal(readFileSync(file, 'utf8'), '{"env":{}}');
      assert.match(file, /\/\d{15}-c0ffee-[0-9a-f]{8}\.json$/);
      assert.deepEqual(readdirSync(dir), [file.slice(dir.length + 1)]);
      assert.equal(statSync(join(root, 'a')).mode & 0o777, 0o700);
      assert.equal(statSync(dir).mode & 0o777, 0o700);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('a spoolDir that cannot be made throws its error at once (no endless retry)', { timeout: 5000 }, () => {
    assert.throws(() => spoolRequest('/proc/steward-no-such/spool', 'c0ffee', '{}'), /ENOENT|mkdir/);
  });
});
