// The shared CNI contract code's exact answers: CniError on the wire, clip and failureSafeText,
// version ordering, the identifier rules' edges, CNI_ARGS and the pod named in it, and the exact
// texts of malformed-result errors (they reach the runtime's log).

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { convertResult } from '../../shared/src/cni/convert.js';
import { decodeWireRequest } from '../../shared/src/wire.js';
import { cniArgsProblem, parseCniArgs, parseCniEnv } from '../../shared/src/cni/env.js';
import { CniError, ErrorCode, clip, failureSafeText, isUncodedPluginFailure } from '../../shared/src/cni/errors.js';
import { podFromCniArgs, podLabel, podLogFields } from '../../shared/src/cni/pod.js';
import { checkContainerId, checkIfName, checkNetworkName, checkPluginType } from '../../shared/src/cni/validate.js';
import {
  LATEST_VERSION,
  SUPPORTED_VERSIONS,
  compareVersions,
  isSupportedVersion,
  versionAtLeast,
} from '../../shared/src/cni/versions.js';

const message = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    return (e as Error).message;
  }
  assert.fail('expected a throw');
};

describe('CniError', () => {
  test('toJSON prints cniVersion, code and msg, and details only when non-empty', () => {
    assert.deepEqual(new CniError(7, 'bad', 'why').toJSON('1.0.0'), {
      cniVersion: '1.0.0',
      code: 7,
      msg: 'bad',
      details: 'why',
    });
    assert.deepEqual(Object.keys(new CniError(7, 'bad', '').toJSON('0.4.0')), ['cniVersion', 'code', 'msg']);
    assert.deepEqual(Object.keys(new CniError(7, 'bad').toJSON('0.4.0')), ['cniVersion', 'code', 'msg']);
    const e = new CniError(11, 'later');
    assert.equal(e.name, 'CniError');
    assert.ok(e instanceof Error);
  });

  test('fromJSON accepts a CNI error object and nothing else', () => {
    const e = CniError.fromJSON({ code: 3, msg: 'gone', details: 'd' })!;
    assert.equal(CniError.fromJSON({ code: 1, msg: 'm' })!.code, 1);
    assert.equal(CniError.fromJSON({ code: 2 ** 53 - 1, msg: 'm' })!.code, 2 ** 53 - 1);
    assert.deepEqual([e.code, e.message, e.details], [3, 'gone', 'd']);
    assert.equal(CniError.fromJSON({ code: 3, msg: 'gone', details: 5 })!.details, undefined);
    for (const bad of [
      null,
      undefined,
      'x',
      3,
      { code: '3', msg: 'm' },
      { code: 3 },
      { msg: 'm' },
      { code: 3, msg: 4 },
      // No CNI error code: a plugin printing these printed no CNI error (the daemon would have answered
      // code null for 1e400, and made a metric series of each number).
      { code: 0, msg: 'm' },
      { code: -3, msg: 'm' },
      { code: 3.5, msg: 'm' },
      { code: Infinity, msg: 'm' },
      { code: NaN, msg: 'm' },
      { code: 2 ** 53, msg: 'm' },
    ]) {
      assert.equal(CniError.fromJSON(bad), undefined, JSON.stringify(bad));
    }
  });

  test('from passes a CniError through and wraps anything else with the fallback code', () => {
    const orig = new CniError(4, 'env');
    assert.equal(CniError.from(orig, 100), orig);
    const wrapped = CniError.from(new Error('boom'), 100);
    assert.deepEqual([wrapped.code, wrapped.message], [100, 'boom']);
    const fromString = CniError.from('text');
    assert.deepEqual([fromString.code, fromString.message], [ErrorCode.Internal, 'text']);
    assert.equal(CniError.from(undefined, 50).message, 'undefined');
  });

  test('the spec codes and the project codes keep their numbers', () => {
    assert.deepEqual(
      [ErrorCode.IncompatibleVersion, ErrorCode.InvalidEnv, ErrorCode.InvalidConfig, ErrorCode.TryAgainLater],
      [1, 4, 7, 11],
    );
    assert.deepEqual(
      [ErrorCode.PluginExecFailed, ErrorCode.TeardownPending, ErrorCode.CheckUnverifiable],
      [100, 105, 107],
    );
  });
});

describe('clip and failureSafeText', () => {
  test('clip keeps text up to max and says how much it cut beyond', () => {
    assert.equal(clip('abcd', 4), 'abcd');
    assert.equal(clip('abcde', 4), 'abcd… [1 more characters cut]');
    assert.equal(clip('', 0), '');
  });

  test('failureSafeText rewrites "not found" and "no such file or directory" in any case', () => {
    assert.equal(
      failureSafeText('Link Not Found; open x: No such file or directory; not found again'),
      'Link not-found; open x: ENOENT; not-found again',
    );
    assert.equal(failureSafeText('fine'), 'fine');
  });

  // Teardown gives up on a DEL that fails the same uncoded way each time (issue 21): only a plugin
  // that printed no CNI error counts, never one that said what went wrong.
  test("an uncoded plugin failure is code 100 ending in the executor's words, nothing else", () => {
    const uncoded = 'plugin bridge (DEL) exited 1 without a CNI error';
    assert.equal(isUncodedPluginFailure(new CniError(ErrorCode.PluginExecFailed, uncoded)), true);
    assert.equal(isUncodedPluginFailure(new CniError(ErrorCode.PluginExecFailed, 'failed to find plugin "x"')), false);
    assert.equal(isUncodedPluginFailure(new CniError(ErrorCode.TeardownPending, uncoded)), false);
    assert.equal(
      isUncodedPluginFailure(new CniError(ErrorCode.PluginExecFailed, 'without a CNI error: bridge (DEL) exited 1')),
      false,
    );
  });
});

describe('versions', () => {
  test('the supported versions, the latest, and what counts as supported', () => {
    assert.deepEqual([...SUPPORTED_VERSIONS], ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
    assert.equal(LATEST_VERSION, '1.1.0');
    assert.equal(isSupportedVersion('1.0.0'), true);
    assert.equal(isSupportedVersion('1.0'), false);
    assert.equal(isSupportedVersion(1), false);
  });

  test('compareVersions orders numerically, missing parts count as 0', () => {
    assert.ok(compareVersions('0.10.0', '0.9.0') > 0);
    assert.ok(compareVersions('0.4.0', '1.0.0') < 0);
    assert.equal(compareVersions('1.0', '1.0.0'), 0);
    assert.ok(compareVersions('1.0.0.1', '1.0.0') > 0);
    assert.ok(compareVersions('1.0.0', '1.0.0.1') < 0);
    assert.equal(compareVersions('1.x.0', '1.0.0'), 0);
  });

  test('versionAtLeast is inclusive', () => {
    assert.equal(versionAtLeast('0.4.0', '0.4.0'), true);
    assert.equal(versionAtLeast('1.0.0', '0.4.0'), true);
    assert.equal(versionAtLeast('0.3.1', '0.4.0'), false);
  });
});

describe('identifier rules at their edges', () => {
  test('names start alphanumeric, then alphanumerics, "_", "." and "-"', () => {
    assert.equal(checkContainerId('a_b.c-1'), undefined);
    assert.equal(checkContainerId(''), 'is empty');
    assert.match(checkContainerId('-a')!, /must start with an alphanumeric/);
    assert.match(checkNetworkName('a b')!, /must start with an alphanumeric/);
    assert.match(checkNetworkName('ab!')!, /only alphanumerics/);
  });

  test('interface names: 15 bytes, not . or .., no "/", ":", whitespace or control characters', () => {
    assert.equal(checkIfName('a'.repeat(15)), undefined);
    assert.equal(checkIfName('a'.repeat(16)), 'is longer than 15 bytes');
    assert.equal(checkIfName('é'.repeat(8)), 'is longer than 15 bytes', 'bytes, not characters');
    assert.equal(checkIfName(''), 'is empty');
    assert.equal(checkIfName('.'), 'must not be "." or ".."');
    assert.equal(checkIfName('..'), 'must not be "." or ".."');
    for (const bad of ['a/b', 'a:b', 'a b', 'a\tb'])
      assert.equal(checkIfName(bad), 'must not contain "/", ":" or whitespace');
    assert.equal(checkIfName('a\u0001b'), 'must not contain control characters');
    assert.equal(checkIfName('a\u007f'), 'must not contain control characters');
    // C1 too: NEL (U+0085) is white space to the plugins' Go, CSI (U+009B) a terminal's escape.
    for (const c1 of ['a\u0080', 'e\u0085', 'a\u009bb', 'a\u009f'])
      assert.equal(checkIfName(c1), 'must not contain control characters', JSON.stringify(c1));
    assert.equal(checkIfName('a\u00a1'), undefined, 'the first character past C1 is no control character');
  });

  test('plugin types are bare names', () => {
    assert.equal(checkPluginType('host-local'), undefined);
    assert.equal(checkPluginType(''), 'is empty');
    assert.equal(checkPluginType('../bridge'), 'must be a bare plugin name, not a path');
    assert.equal(checkPluginType('a\\b'), 'must be a bare plugin name, not a path');
    assert.match(checkPluginType('.hidden')!, /must start with an alphanumeric/);
  });
});

describe('CNI environment and CNI_ARGS', () => {
  const base = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c1', CNI_NETNS: '/n', CNI_IFNAME: 'eth0', CNI_PATH: '/p' };

  test('an unset or unknown CNI_COMMAND is code 4 naming the commands', () => {
    for (const env of [{}, { CNI_COMMAND: '' }]) {
      assert.throws(
        () => parseCniEnv(env),
        (e: CniError) =>
          e.code === 4 &&
          e.message === 'CNI_COMMAND is not set' &&
          e.details === 'expected one of ADD, DEL, CHECK, GC, STATUS, VERSION',
      );
    }
    assert.throws(
      () => parseCniEnv({ CNI_COMMAND: 'add' }),
      (e: CniError) =>
        e.code === 4 && e.message === 'CNI_COMMAND "add" is not a CNI command' && /ADD, DEL/.test(e.details!),
    );
  });

  test('every problem is reported in one message', () => {
    assert.equal(
      message(() => parseCniEnv({ CNI_COMMAND: 'ADD', CNI_CONTAINERID: '-x', CNI_IFNAME: 'a/b', CNI_ARGS: 'k' })),
      'invalid CNI environment: CNI_NETNS is not set; CNI_PATH is not set; ' +
        'CNI_CONTAINERID must start with an alphanumeric character and contain only alphanumerics, "_", "." and "-"; ' +
        'CNI_IFNAME must not contain "/", ":" or whitespace; ' +
        'CNI_ARGS pair "k" is malformed: want KEY=VALUE pairs separated by ";" (no empty pair, no "=" in a value)',
    );
    assert.equal(
      message(() => parseCniEnv({ CNI_COMMAND: 'CHECK' })),
      'invalid CNI environment: CNI_CONTAINERID is not set; CNI_NETNS is not set; CNI_IFNAME is not set; CNI_PATH is not set',
    );
    assert.equal(
      message(() => parseCniEnv({ ...base, CNI_NETNS: '/n\n' })),
      'invalid CNI environment: CNI_NETNS contains control characters',
    );
    // Bytes that are not UTF-8 reach the process as U+FFFD: the value is no longer the runtime's.
    assert.equal(
      message(() => parseCniEnv({ ...base, CNI_COMMAND: 'DEL', CNI_IFNAME: 'eth\uFFFD', CNI_ARGS: 'K=\uFFFD' })),
      'invalid CNI environment: CNI_IFNAME is not valid UTF-8; CNI_ARGS is not valid UTF-8',
    );
  });

  test('DEL may have an empty netns and a CNI_ARGS the plugins would refuse; its values come through', () => {
    const env = parseCniEnv({ ...base, CNI_COMMAND: 'DEL', CNI_NETNS: '', CNI_ARGS: 'a=b=c' });
    assert.deepEqual(env, { command: 'DEL', containerId: 'c1', netns: '', ifname: 'eth0', args: 'a=b=c', path: '/p' });
    assert.deepEqual(parseCniEnv({ CNI_COMMAND: 'VERSION' }), {
      command: 'VERSION',
      containerId: '',
      netns: '',
      ifname: '',
      args: '',
      path: '',
    });
    assert.throws(
      () => parseCniEnv({ ...base, CNI_COMMAND: 'CHECK', CNI_ARGS: 'a=b;' }),
      (e: CniError) => e.code === 4,
    );
  });

  test('cniArgsProblem and parseCniArgs', () => {
    assert.equal(cniArgsProblem(''), undefined);
    assert.equal(cniArgsProblem('A=1;B=2'), undefined);
    assert.match(cniArgsProblem('A=1;')!, /pair "" is malformed/);
    assert.match(cniArgsProblem('A=1=2')!, /pair "A=1=2" is malformed/);
    assert.deepEqual(parseCniArgs(''), []);
    assert.deepEqual(parseCniArgs('A=1;;B=x=y'), [
      ['A', '1'],
      ['B', 'x=y'],
    ]);
    assert.throws(
      () => parseCniArgs('=v'),
      (e: CniError) => e.code === 4 && e.message === 'CNI_ARGS has a malformed pair "=v"',
    );
  });

  test('the pod named in CNI_ARGS: trimmed, empty values and look-alike keys ignored', () => {
    assert.deepEqual(podFromCniArgs(' K8S_POD_NAME = web ;=x;K8S_POD_UID=;X=1;K8S_POD_NAMESPACE=ns;IgnoreUnknown=1'), {
      namespace: 'ns',
      name: 'web',
      uid: null,
    });
    assert.deepEqual(podFromCniArgs('K8S_POD_NAME=a=b'), { namespace: null, name: 'a=b', uid: null });
    assert.deepEqual(podFromCniArgs(null), { namespace: null, name: null, uid: null });
    assert.deepEqual(podFromCniArgs('K8S_POD_NAMEx'), { namespace: null, name: null, uid: null }, 'no "=": no pair');
    assert.deepEqual(podFromCniArgs('toString=x;constructor=y'), { namespace: null, name: null, uid: null });
    assert.equal(podLabel({ namespace: 'ns', name: 'p' }), 'ns/p');
    assert.equal(podLabel({ namespace: null, name: 'p' }), 'p');
    assert.equal(podLabel({ namespace: 'ns', name: null }), null);
    assert.deepEqual(podLogFields({ namespace: null, name: 'p', uid: 'u' }), { podName: 'p', podUid: 'u' });
    assert.deepEqual(podLogFields({ namespace: 'n', name: null, uid: null }), { podNamespace: 'n' });
  });
});

describe('malformed results: the exact error texts', () => {
  const at = (input: unknown, to = '1.0.0') => message(() => convertResult(input, to));

  test('each kind of value is described as it is', () => {
    assert.equal(at(null), 'malformed CNI result: a CNI result must be a JSON object, got null');
    assert.equal(at([]), 'malformed CNI result: a CNI result must be a JSON object, got an array');
    assert.equal(at(42), 'malformed CNI result: a CNI result must be a JSON object, got number 42');
    assert.equal(
      at('x'.repeat(40)),
      `malformed CNI result: a CNI result must be a JSON object, got the string "${'x'.repeat(40)}"`,
    );
    assert.equal(
      at('y'.repeat(41)),
      `malformed CNI result: a CNI result must be a JSON object, got the string "${'y'.repeat(40)}..."`,
    );
    assert.equal(at({ cniVersion: null }), 'malformed CNI result: the CNI result has no cniVersion');
    assert.equal(
      at({ cniVersion: { v: 1 } }),
      "malformed CNI result: the CNI result's cniVersion must be a string, got an object",
    );
    assert.equal(at({ cniVersion: '1.0.0' }, '9.9'), 'cannot convert a CNI result to unsupported version "9.9"');
  });

  test('fields are named with their path and what was found', () => {
    assert.equal(
      at({ cniVersion: '1.0.0', interfaces: [{ name: 'e', mac: 5 }] }),
      'malformed CNI result: interfaces[0].mac must be a string, got number 5',
    );
    assert.equal(
      at({ cniVersion: '1.1.0', interfaces: [{ name: 'e', mtu: Infinity }] }),
      'malformed CNI result: interfaces[0].mtu must be a number, got number Infinity',
    );
    assert.equal(
      at({ cniVersion: '1.0.0', ips: [{ address: '' }] }),
      'malformed CNI result: ips[0].address must be a non-empty string, got the string ""',
    );
    assert.equal(
      at({ cniVersion: '1.0.0', ips: [{ address: '10.0.0.1/24', interface: 1.5 }] }),
      'malformed CNI result: ips[0].interface must be a non-negative integer, got number 1.5',
    );
    assert.equal(
      at({ cniVersion: '1.0.0', ips: [{ address: '10.0.0.1/24', gateway: false }] }),
      'malformed CNI result: ips[0].gateway must be a string, got boolean false',
    );
    assert.equal(
      at({ cniVersion: '1.0.0', routes: [{ dst: '' }] }),
      'malformed CNI result: routes[0].dst must be a non-empty string, got the string ""',
    );
    assert.equal(
      at({ cniVersion: '1.0.0', ips: ['x'] }),
      'malformed CNI result: ips[0] must be an object, got the string "x"',
    );
    assert.equal(
      at({ cniVersion: '1.0.0', dns: { options: ['a', null] } }),
      'malformed CNI result: dns.options[1] must be a string, got null',
    );
    assert.equal(
      at({ cniVersion: '1.0.0', dns: { domain: 1 } }),
      'malformed CNI result: dns.domain must be a string, got number 1',
    );
    assert.equal(
      at({ cniVersion: '1.0.0', routes: 'r' }),
      'malformed CNI result: routes must be an array, got the string "r"',
    );
  });

  test('unsupported versions say which are supported; a missing cniVersion is named as missing', () => {
    const details = (fn: () => unknown) => {
      try {
        fn();
      } catch (e) {
        return (e as CniError).details;
      }
      return undefined;
    };
    const supported = 'supported versions: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0';
    assert.equal(
      details(() => convertResult({ cniVersion: '1.0.0' }, '2.0.0')),
      supported,
    );
    assert.equal(
      details(() => convertResult({ cniVersion: '2.0.0' }, '1.0.0')),
      supported,
    );
    assert.equal(at({}), 'malformed CNI result: the CNI result has no cniVersion');
    assert.equal(at({ cniVersion: '' }), 'malformed CNI result: the CNI result has no cniVersion');
  });

  test('every optional string and number field is type-checked; null means absent', () => {
    const iface = (extra: Record<string, unknown>) =>
      at({ cniVersion: '1.1.0', interfaces: [{ name: 'e', ...extra }] });
    for (const key of ['sandbox', 'socketPath', 'pciID']) {
      assert.equal(iface({ [key]: 1 }), `malformed CNI result: interfaces[0].${key} must be a string, got number 1`);
    }
    assert.equal(
      at({ cniVersion: '1.0.0', routes: [{ dst: '0.0.0.0/0', gw: 1 }] }),
      'malformed CNI result: routes[0].gw must be a string, got number 1',
    );
    assert.equal(
      at({ cniVersion: '1.0.0', interfaces: 'x' }),
      'malformed CNI result: interfaces must be an array, got the string "x"',
    );
    assert.deepEqual(convertResult({ cniVersion: '1.1.0', interfaces: [{ name: 'e', mtu: null }] }, '1.1.0'), {
      cniVersion: '1.1.0',
      interfaces: [{ name: 'e' }],
    });
  });

  test('nested unknown values are deep-copied, not shared with the input', () => {
    const input = { cniVersion: '1.0.0', interfaces: [{ name: 'e', extra: { deep: { n: 1 } } }] };
    const out = convertResult(input, '1.0.0');
    const extra = out.interfaces![0]!.extra as { deep: { n: number } };
    assert.deepEqual(extra, { deep: { n: 1 } });
    assert.notEqual(extra, input.interfaces[0]!.extra);
    assert.notEqual(extra.deep, input.interfaces[0]!.extra.deep);
  });

  test('a 0.x source saying "4" for an IPv6 address is kept as said', () => {
    const out = convertResult({ cniVersion: '0.4.0', ips: [{ version: '4', address: 'fd00::2/64' }] }, '0.3.1');
    assert.equal(out.ips![0]!.version, '4');
  });

  test('null optional fields and sections are absent; a null ip interface is dropped, index 0 kept', () => {
    assert.deepEqual(
      convertResult(
        {
          cniVersion: '1.0.0',
          interfaces: null,
          routes: null,
          dns: null,
          ips: [
            { address: '10.0.0.2/24', interface: null, gateway: null },
            { address: '10.0.0.3/24', interface: 0 },
          ],
        },
        '1.0.0',
      ),
      { cniVersion: '1.0.0', ips: [{ address: '10.0.0.2/24' }, { address: '10.0.0.3/24', interface: 0 }] },
    );
    assert.deepEqual(convertResult({ cniVersion: '1.0.0', dns: { domain: null, search: null } }, '1.0.0'), {
      cniVersion: '1.0.0',
      dns: {},
    });
    assert.deepEqual(
      convertResult({ cniVersion: '1.0.0', routes: [{ dst: '0.0.0.0/0', gw: null, extra: [undefined, 1] }] }, '1.0.0'),
      { cniVersion: '1.0.0', routes: [{ dst: '0.0.0.0/0', extra: [null, 1] }] },
    );
  });

  test('a 0.x source IP version other than "4"/"6" is re-derived; "4" and "6" are kept as given', () => {
    const ip = (version: unknown) =>
      convertResult({ cniVersion: '0.4.0', ips: [{ version, address: '10.0.0.2/24' }] }, '0.3.1');
    assert.equal(ip('6').ips![0]!.version, '6', 'kept as the source said');
    assert.equal(ip('4').ips![0]!.version, '4');
    assert.equal(ip('5').ips![0]!.version, '4', 're-derived from the address');
    assert.equal(ip(6).ips![0]!.version, '4');
  });
});

describe('decodeWireRequest', () => {
  test('a body that is not a JSON object is a decoding failure (6), whatever JSON it is', () => {
    for (const body of [null, 42, 'x', [], [{ env: {} }]]) {
      assert.throws(
        () => decodeWireRequest(body),
        (e: CniError) => e.code === ErrorCode.DecodeFailure && /must be a JSON object/.test(e.message),
        JSON.stringify(body),
      );
    }
    // An object without its env is the request's fault in another way: invalid environment (4).
    assert.throws(
      () => decodeWireRequest({ config: {} }),
      (e: CniError) => e.code === ErrorCode.InvalidEnv,
    );
  });

  test('a netconf nesting deeper than 100 levels: 7 on every command but DEL, whose netconf keeps its top-level keys that do not', () => {
    const nest = (levels: number): unknown => JSON.parse(`${'['.repeat(levels)}${']'.repeat(levels)}`);
    const env = (command: string) => ({
      CNI_COMMAND: command,
      CNI_CONTAINERID: 'c',
      CNI_NETNS: '/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/opt/cni/bin',
    });
    const config = JSON.parse(
      `{"name":"n","delegates":[{"name":"d"}],"__proto__":{"k":1},"runtimeConfig":{"x":${JSON.stringify(nest(150))}}}`,
    ) as Record<string, unknown>;
    for (const command of ['ADD', 'CHECK', 'GC', 'STATUS'])
      assert.throws(
        () => decodeWireRequest({ env: env(command), config }),
        (e: CniError) => e.code === ErrorCode.InvalidConfig && /deeper than 100 levels/.test(e.message),
        command,
      );
    const del = decodeWireRequest({ env: env('DEL'), config });
    assert.deepEqual(Object.keys(del.config), ['name', 'delegates', '__proto__']);
    assert.deepEqual(del.config.__proto__, { k: 1 }, 'a "__proto__" key stays a key');
    assert.equal(Object.getPrototypeOf(del.config), Object.prototype);
    // Exactly at the bound (the netconf, runtimeConfig, then x: 98 arrays, 100 levels) nothing is cut.
    const at = { name: 'n', runtimeConfig: { x: nest(98) } };
    assert.equal(decodeWireRequest({ env: env('ADD'), config: at }).config, at);
    assert.deepEqual(
      Object.keys(decodeWireRequest({ env: env('DEL'), config: { ...at, runtimeConfig: { x: nest(99) } } }).config),
      ['name'],
    );
  });
});
