// Capping echoed text at a character boundary, and CNI_PATH handling in plugin lookup.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { capText } from '../../daemon/src/routes/echo.js';
import { pluginSearchPath } from '../../daemon/src/plugins/lookup.js';

describe('capText', () => {
  it('leaves short text alone and cuts long text with a marker', () => {
    assert.equal(capText('hello', 10), 'hello');
    const cut = capText('x'.repeat(5000), 1024);
    assert.equal(cut, `${'x'.repeat(1024)}… [cut 3976 bytes]`);
  });

  it('never splits a UTF-8 character', () => {
    const text = 'é'.repeat(1000); // 2 bytes each
    const cut = capText(text, 1023);
    assert.ok(!cut.includes('\ufffd'));
    assert.match(cut, /^é{511}… \[cut 978 bytes\]$/);
  });
});

describe('pluginSearchPath', () => {
  it('drops relative CNI_PATH entries and reports each', () => {
    const ignored: string[] = [];
    const dirs = pluginSearchPath(['/opt/cni/bin'], 'bin:/usr/lib/cni::./x:../y:/opt/cni/bin', (e) => ignored.push(e));
    assert.deepEqual(dirs, ['/opt/cni/bin', '/usr/lib/cni']);
    assert.deepEqual(ignored, ['bin', './x', '../y']);
  });
});
