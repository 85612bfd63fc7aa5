import assert from 'node:assert/strict';
import { test } from 'node:test';

import { convertResult } from '../../shared/src/cni/convert.js';

// A plugin's result is parsed from its stdout: a "__proto__" key there is data, never a prototype.
test('a "__proto__" key inside a plugin result stays an own key and lends the copy nothing', () => {
  const stdout =
    '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","__proto__":{"sandbox":"/var/run/netns/evil"}}],' +
    '"ips":[{"address":"10.1.0.2/24","interface":0}]}';
  const out = convertResult(JSON.parse(stdout), '1.0.0');
  const eth0 = out.interfaces![0]!;
  assert.equal(Object.getPrototypeOf(eth0), Object.prototype);
  assert.equal(eth0.sandbox, undefined, 'no sandbox inherited from a "__proto__" key');
  assert.deepEqual(Object.keys(eth0), ['name', '__proto__'], 'the key survives the copy as data');
});
