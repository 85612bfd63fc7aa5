import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { MAX_ARG_STRLEN, cniArgsProblem, parseCniArgs, parseCniEnv } from '../../shared/src/cni/env.js';
import { CniError, ErrorCode } from '../../shared/src/cni/errors.js';

const FULL = {
  CNI_COMMAND: 'ADD',
  CNI_CONTAINERID: 'abc123',
  CNI_NETNS: '/var/run/netns/cni-1',
  CNI_IFNAME: 'eth0',
  CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAME=web-0',
  CNI_PATH: '/opt/cni/bin',
};

function invalidEnv(...mentions: string[]) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof CniError, `expected a CniError, got ${String(err)}`);
    assert.equal(err.code, ErrorCode.InvalidEnv);
    assert.equal(err.code, 4);
    for (const m of mentions) assert.ok(err.message.includes(m), `"${err.message}" should mention ${m}`);
    return true;
  };
}

describe('parseCniEnv', () => {
  test("a value a plugin could not be exec'd with (over MAX_ARG_STRLEN as NAME=value) is code 4, for every command", () => {
    assert.equal(MAX_ARG_STRLEN, 131072);
    // "CNI_ARGS=" is 9 bytes and the NUL one: the longest value that fits is 131062 bytes.
    const longest = 'K=' + 'v'.repeat(131062 - 2);
    assert.equal(parseCniEnv({ ...FULL, CNI_ARGS: longest }).args, longest);
    for (const command of ['ADD', 'DEL']) {
      assert.throws(
        () => parseCniEnv({ ...FULL, CNI_COMMAND: command, CNI_ARGS: longest + 'v' }),
        invalidEnv("CNI_ARGS is longer than a plugin's environment can carry (131072 bytes as CNI_ARGS=value)"),
      );
    }
    // Counted in bytes: 65,532 two-byte characters and "CNI_PATH=" are over it.
    assert.throws(
      () => parseCniEnv({ ...FULL, CNI_PATH: '/' + 'é'.repeat(65_532) }),
      invalidEnv('CNI_PATH is longer than'),
    );
  });

  test('returns every field of a complete ADD environment', () => {
    assert.deepEqual(parseCniEnv(FULL), {
      command: 'ADD',
      containerId: 'abc123',
      netns: '/var/run/netns/cni-1',
      ifname: 'eth0',
      args: 'IgnoreUnknown=1;K8S_POD_NAME=web-0',
      path: '/opt/cni/bin',
    });
  });

  test('reports all missing variables of an ADD in one code 4 error', () => {
    assert.throws(
      () => parseCniEnv({ CNI_COMMAND: 'ADD' }),
      invalidEnv('CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'),
    );
  });

  test('reports missing and invalid variables together in one code 4 error', () => {
    let thrown = 0;
    try {
      parseCniEnv({ CNI_COMMAND: 'CHECK', CNI_CONTAINERID: '../x', CNI_IFNAME: 'a/b', CNI_NETNS: '' });
    } catch (err) {
      thrown++;
      invalidEnv('CNI_CONTAINERID', 'CNI_IFNAME', 'CNI_NETNS', 'CNI_PATH')(err);
    }
    assert.equal(thrown, 1);
  });

  test('treats an empty variable as missing', () => {
    assert.throws(() => parseCniEnv({ ...FULL, CNI_PATH: '' }), invalidEnv('CNI_PATH'));
  });

  test('accepts DEL with an empty CNI_NETNS', () => {
    const env = parseCniEnv({ ...FULL, CNI_COMMAND: 'DEL', CNI_NETNS: '' });
    assert.equal(env.command, 'DEL');
    assert.equal(env.netns, '');
    assert.equal(env.containerId, 'abc123');
  });

  test('accepts DEL without CNI_NETNS at all', () => {
    const { CNI_NETNS: _unused, ...rest } = FULL;
    assert.equal(parseCniEnv({ ...rest, CNI_COMMAND: 'DEL' }).netns, '');
  });

  test('still requires CNI_CONTAINERID and CNI_IFNAME for DEL', () => {
    assert.throws(
      () => parseCniEnv({ CNI_COMMAND: 'DEL', CNI_PATH: '/opt/cni/bin' }),
      invalidEnv('CNI_CONTAINERID', 'CNI_IFNAME'),
    );
  });

  test('accepts VERSION with nothing else set', () => {
    assert.deepEqual(parseCniEnv({ CNI_COMMAND: 'VERSION' }), {
      command: 'VERSION',
      containerId: '',
      netns: '',
      ifname: '',
      args: '',
      path: '',
    });
  });

  test('accepts GC and STATUS with only CNI_PATH', () => {
    for (const command of ['GC', 'STATUS']) {
      assert.equal(parseCniEnv({ CNI_COMMAND: command, CNI_PATH: '/opt/cni/bin' }).command, command);
      assert.throws(() => parseCniEnv({ CNI_COMMAND: command }), invalidEnv('CNI_PATH'));
    }
  });

  test('rejects an unknown CNI_COMMAND, naming it', () => {
    assert.throws(() => parseCniEnv({ ...FULL, CNI_COMMAND: 'FROB' }), invalidEnv('FROB'));
    assert.throws(() => parseCniEnv({ ...FULL, CNI_COMMAND: 'add' }), invalidEnv('add'));
  });

  test('rejects a missing CNI_COMMAND', () => {
    const { CNI_COMMAND: _unused, ...rest } = FULL;
    assert.throws(() => parseCniEnv(rest), invalidEnv('CNI_COMMAND'));
  });

  test('rejects CNI_CONTAINERID "../x"', () => {
    assert.throws(() => parseCniEnv({ ...FULL, CNI_CONTAINERID: '../x' }), invalidEnv('CNI_CONTAINERID'));
  });

  test('rejects CNI_IFNAME "a/b"', () => {
    assert.throws(() => parseCniEnv({ ...FULL, CNI_IFNAME: 'a/b' }), invalidEnv('CNI_IFNAME'));
  });

  test('rejects a 16-byte CNI_IFNAME', () => {
    assert.throws(() => parseCniEnv({ ...FULL, CNI_IFNAME: 'abcdefghijklmnop' }), invalidEnv('CNI_IFNAME'));
  });

  test('refuses "%" in CNI_IFNAME on ADD and CHECK (a kernel name template), and lets its DEL through', () => {
    for (const command of ['ADD', 'CHECK'])
      for (const ifname of ['eth%d', '%', 'net1%'])
        assert.throws(
          () => parseCniEnv({ ...FULL, CNI_COMMAND: command, CNI_IFNAME: ifname }),
          invalidEnv('CNI_IFNAME must not contain "%"', 'eth%d becomes eth0'),
        );
    assert.equal(parseCniEnv({ ...FULL, CNI_COMMAND: 'DEL', CNI_IFNAME: 'eth%d' }).ifname, 'eth%d');
    // Reported with the other problems, in one error.
    assert.throws(
      () => parseCniEnv({ ...FULL, CNI_IFNAME: 'e%', CNI_CONTAINERID: '../x' }),
      invalidEnv('CNI_CONTAINERID', 'CNI_IFNAME must not contain "%"'),
    );
  });
});

describe('parseCniArgs', () => {
  test('parses "IgnoreUnknown=1;K8S_POD_NAME=x" into pairs', () => {
    assert.deepEqual(parseCniArgs('IgnoreUnknown=1;K8S_POD_NAME=x'), [
      ['IgnoreUnknown', '1'],
      ['K8S_POD_NAME', 'x'],
    ]);
  });

  test('parses the empty string into no pairs', () => {
    assert.deepEqual(parseCniArgs(''), []);
  });

  test('keeps an empty value', () => {
    assert.deepEqual(parseCniArgs('K8S_POD_INFRA_CONTAINER_ID='), [['K8S_POD_INFRA_CONTAINER_ID', '']]);
  });

  test('rejects "novalue" with code 4, quoting the pair', () => {
    assert.throws(() => parseCniArgs('novalue'), invalidEnv('novalue'));
    assert.throws(() => parseCniArgs('IgnoreUnknown=1;novalue'), invalidEnv('novalue'));
  });

  test('rejects a pair with an empty key', () => {
    assert.throws(() => parseCniArgs('=x'), invalidEnv('=x'));
  });
});

describe('CNI_ARGS as the reference plugins parse them', () => {
  test('accepts KEY=VALUE pairs, empty values and an empty string', () => {
    for (const ok of ['', 'IgnoreUnknown=1', 'IgnoreUnknown=1;K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=default', 'K=']) {
      assert.equal(cniArgsProblem(ok), undefined, ok);
    }
  });
  test('refuses an empty pair, a pair without "=", and a value containing "="', () => {
    for (const bad of ['IgnoreUnknown=1;', ';A=1', 'A=1;;B=2', 'garbage', 'K=a=b'])
      assert.match(cniArgsProblem(bad) ?? '', /malformed/, bad);
  });
  test('is checked on ADD and CHECK, never on DEL (a DEL must succeed for as much input as possible)', () => {
    const base = {
      CNI_CONTAINERID: 'c1',
      CNI_NETNS: '/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/opt/cni/bin',
      CNI_ARGS: 'garbage',
    };
    assert.throws(() => parseCniEnv({ ...base, CNI_COMMAND: 'ADD' }), /CNI_ARGS pair "garbage"/);
    assert.throws(() => parseCniEnv({ ...base, CNI_COMMAND: 'CHECK' }), /CNI_ARGS/);
    assert.equal(parseCniEnv({ ...base, CNI_COMMAND: 'DEL' }).args, 'garbage');
  });
});
