// The spool's one name format (shared/vectors/spool.json): stewardd's ingest (SPOOL_NAME) reads
// exactly what both writers produce, the Go shim's (shim/spool.go, checked by go test against the
// same file) and the degraded daemon's (shared/src/spool.ts spoolRequest).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { SPOOL_NAME, SPOOL_TEMP_NAME, spoolRequest } from '@cni-steward/shared';
import { REPO } from '../helpers/env.js';

const description = JSON.parse(readFileSync(join(REPO, 'shared/vectors/spool.json'), 'utf8')) as {
  namePattern: string;
  tempPattern: string;
  examples: Array<{ ms: number; containerId: string; random: string; name: string }>;
};

describe('the spool file name format', () => {
  it("stewardd's ingest pattern is the vector file's", () => {
    assert.equal(SPOOL_NAME.source, description.namePattern);
  });

  it("stewardd's stale temp file pattern is the vector file's temp pattern", () => {
    assert.equal(SPOOL_TEMP_NAME.source, description.tempPattern);
  });

  it('every example name is read back as its time and container id, and no temp name is', () => {
    const temp = new RegExp(description.tempPattern);
    for (const ex of description.examples) {
      const m = SPOOL_NAME.exec(ex.name);
      assert.ok(m, ex.name);
      assert.equal(Number(m[1]), ex.ms);
      assert.equal(m[2], ex.containerId.slice(0, 64));
      const tmp = `.${ex.name.replace(/\.json$/, '.tmp')}`;
      assert.match(tmp, temp);
      assert.doesNotMatch(tmp, SPOOL_NAME);
    }
  });

  it("the daemon's own writer names its files in the same format", () => {
    const dir = mkdtempSync(join(tmpdir(), 'stw-spoolvec-'));
    try {
      const id = 'c'.repeat(70);
      const m = SPOOL_NAME.exec(basename(spoolRequest(dir, id, '{}')));
      assert.ok(m);
      assert.equal(m[2], id.slice(0, 64));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
