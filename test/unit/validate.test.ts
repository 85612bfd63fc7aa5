import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  MAX_CONTAINER_ID_LENGTH,
  checkContainerId,
  checkIfName,
  checkNetworkName,
  checkPluginType,
} from '../../shared/src/cni/validate.js';

const IFNAME_16 = 'abcdefghijklmnop';
const IFNAME_15 = 'abcdefghijklmno';

type Check = (value: string) => string | undefined;

const CHECKS: Array<[string, Check]> = [
  ['checkContainerId', checkContainerId],
  ['checkIfName', checkIfName],
  ['checkNetworkName', checkNetworkName],
  ['checkPluginType', checkPluginType],
];

// true = accepted, false = rejected; columns follow CHECKS.
const TABLE: Array<[input: string, containerId: boolean, ifName: boolean, networkName: boolean, pluginType: boolean]> =
  [
    ['../x', false, false, false, false],
    ['a/b', false, false, false, false],
    ['', false, false, false, false],
    ['eth0', true, true, true, true],
    [IFNAME_16, true, false, true, true],
    [IFNAME_15, true, true, true, true],
    ['.', false, false, false, false],
    ['..', false, false, false, false],
    ['e:0', false, false, false, false],
    ['e 0', false, false, false, false],
    ['../../bin/sh', false, false, false, false],
    ['bridge', true, true, true, true],
    ['host-local', true, true, true, true],
    ['a', true, true, true, true],
  ];

assert.equal(IFNAME_16.length, 16);
assert.equal(IFNAME_15.length, 15);

for (const [index, [fnName, check]] of CHECKS.entries()) {
  describe(fnName, () => {
    for (const row of TABLE) {
      const input = row[0];
      const accepted = row[index + 1] as boolean;
      const shown = input === '' ? 'the empty string' : JSON.stringify(input);
      if (accepted) {
        test(`accepts ${shown}`, () => {
          assert.equal(check(input), undefined);
        });
      } else {
        test(`rejects ${shown} with a reason`, () => {
          const why = check(input);
          assert.equal(typeof why, 'string');
          assert.notEqual(why, '');
        });
      }
    }
  });
}

describe('validation details', () => {
  test('checkIfName counts bytes, not characters', () => {
    assert.equal(checkIfName('é'.repeat(7)), undefined); // 14 bytes
    assert.match(checkIfName('é'.repeat(8)) ?? '', /15 bytes/); // 8 characters, 16 bytes
  });

  test('checkIfName rejects tabs and newlines as whitespace', () => {
    assert.notEqual(checkIfName('e\t0'), undefined);
    assert.notEqual(checkIfName('eth0\n'), undefined);
  });

  test('checkPluginType calls a path a path', () => {
    assert.match(checkPluginType('../../bin/sh') ?? '', /path/);
    assert.match(checkPluginType('/opt/cni/bin/bridge') ?? '', /path/);
    assert.match(checkPluginType('..\\bridge') ?? '', /path/);
  });

  test('checkContainerId accepts a 64-hex-character id as runtimes generate', () => {
    assert.equal(checkContainerId('9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'), undefined);
  });

  test('checkContainerId bounds the length at MAX_CONTAINER_ID_LENGTH', () => {
    assert.equal(checkContainerId('a'.repeat(MAX_CONTAINER_ID_LENGTH)), undefined);
    assert.match(checkContainerId('a'.repeat(MAX_CONTAINER_ID_LENGTH + 1)) ?? '', /at most 1024/);
    assert.match(checkContainerId('a'.repeat(100_000)) ?? '', /100000 characters long/);
  });

  test('names may contain "_", "." and "-" after the first character but not start with them', () => {
    for (const check of [checkContainerId, checkNetworkName, checkPluginType]) {
      assert.equal(check('k8s-pod_network.v1'), undefined);
      assert.notEqual(check('-x'), undefined);
      assert.notEqual(check('_x'), undefined);
      assert.notEqual(check('.x'), undefined);
    }
  });
});
