// Which cniVersion steward's conflist is written at (issue 30), as a pure decision: 1.1.0 exactly
// where the runtime accepts it and calls STATUS (containerd >= 2.0.1, CRI-O >= 1.32), the primary's
// version for everything else, whatever way the runtime failed to say what it is.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  chooseConflistVersion,
  conflistVersionOf,
  describeChoice,
  MAX_RUNTIME_TEXT,
  parseCniVersionMode,
  parseRuntimeVersion,
} from '../../daemon/src/lifecycle/cni-version.js';

const rt = (name: string, version: string) => ({ name, version, endpoint: 'unix:///run/x.sock' });
const pick = (name: string, version: string) => chooseConflistVersion('auto', rt(name, version)).version;

describe('the conflist version auto chooses', () => {
  it('1.1.0 from containerd 2.0.1 and CRI-O 1.32.0 on; the primary below them', () => {
    assert.equal(pick('containerd', 'v2.0.1'), '1.1.0');
    assert.equal(pick('containerd', '2.1.0'), '1.1.0');
    assert.equal(pick('containerd', 'v3.0.0'), '1.1.0');
    assert.equal(pick('containerd', 'v2.0.0'), null, '2.0.0 has libcni 1.2.3 but never calls STATUS');
    assert.equal(pick('containerd', 'v1.7.24'), null);
    assert.equal(pick('containerd', '1.6.20~ds1'), null);
    assert.equal(pick('cri-o', '1.32.0'), '1.1.0');
    assert.equal(pick('cri-o', '1.33.2'), '1.1.0');
    assert.equal(pick('cri-o', '1.31.5'), null);
    assert.equal(pick('cri-o', '1.30.0'), null);
  });

  it('a pre-release of the first version that calls STATUS is before it (semver); a later one is not', () => {
    assert.equal(pick('containerd', 'v2.0.1-rc.1'), null);
    assert.equal(pick('cri-o', '1.32.0-dev'), null);
    assert.equal(pick('containerd', 'v2.0.2-rc.1'), '1.1.0');
    assert.equal(pick('containerd', '2.0.1+unknown'), '1.1.0');
    assert.equal(pick('containerd', '1.7.24-k3s1'), null);
  });

  it('an unknown runtime, a version it cannot read, or no answer: the primary, saying why', () => {
    const unknown = chooseConflistVersion('auto', rt('podman', '5.0.0'));
    assert.equal(unknown.version, null);
    assert.match(unknown.reason, /not a runtime steward knows/);
    assert.match(chooseConflistVersion('auto', rt('containerd', 'main')).reason, /cannot read its version/);
    const none = chooseConflistVersion('auto', { error: 'Version failed: 14 UNAVAILABLE', endpoint: null });
    assert.equal(none.version, null);
    assert.equal(none.runtime, undefined);
    assert.match(none.reason, /did not say what it is \(Version failed: 14 UNAVAILABLE\)/);
  });

  it('primary and a fixed version are what they say, asked or not', () => {
    assert.equal(chooseConflistVersion('primary', rt('containerd', 'v2.0.1')).version, null);
    assert.equal(chooseConflistVersion('0.4.0', undefined).version, '0.4.0');
    const pinned = chooseConflistVersion('1.1.0', rt('containerd', 'v2.0.1'));
    assert.equal(pinned.version, '1.1.0');
    assert.equal(pinned.statusAsked, true);
    assert.equal(conflistVersionOf(undefined, '1.0.0'), '1.0.0');
    assert.equal(conflistVersionOf(chooseConflistVersion('primary', undefined), '0.3.1'), '0.3.1');
    assert.equal(conflistVersionOf(pinned, '1.0.0'), '1.1.0');
    assert.equal(parseCniVersionMode('1.2.0'), undefined);
    assert.equal(parseCniVersionMode('primary'), 'primary');
  });

  it('runtime versions are read as the runtimes write them', () => {
    assert.deepEqual(parseRuntimeVersion('v1.7.24'), [1, 7, 24, false]);
    assert.deepEqual(parseRuntimeVersion('1.6.20~ds1'), [1, 6, 20, false]);
    assert.deepEqual(parseRuntimeVersion('1.32.0-rc.1'), [1, 32, 0, true]);
    assert.deepEqual(parseRuntimeVersion('2.0.1+unknown'), [2, 0, 1, false]);
    assert.equal(parseRuntimeVersion('1.32'), undefined);
    assert.equal(parseRuntimeVersion('v2.0.1x'), undefined);
  });

  it("status says whether STATUS reaches steward, with the runtime and the conflist's version", () => {
    const c = chooseConflistVersion('auto', rt('containerd', 'v1.7.24'));
    assert.equal(
      describeChoice(c, '1.0.0'),
      'STATUS: not asked by this runtime (conflist 1.0.0, containerd v1.7.24; --cni-version auto: containerd v1.7.24 does not ask STATUS)',
    );
    assert.match(
      describeChoice(chooseConflistVersion('auto', rt('cri-o', '1.32.0')), '1.1.0'),
      /^STATUS: asked by this runtime/,
    );
    // A version given by hand says so once, not "--cni-version primary: --cni-version primary".
    assert.equal(
      describeChoice(chooseConflistVersion('primary', rt('containerd', 'v1.7.24')), '1.0.0'),
      'STATUS: not asked by this runtime (conflist 1.0.0, containerd v1.7.24; --cni-version primary: chosen by hand)',
    );
  });
});

describe('what a runtime says about itself is bounded and escaped (issue 38)', () => {
  it('ANSI escapes and a forged line in the name and version come out as escapes, never raw', () => {
    const c = chooseConflistVersion('auto', rt('containerd\u001b[2J', 'v2.0.1\nsetup: installed everything'));
    const all = `${c.reason} ${c.runtime?.name} ${c.runtime?.version}`;
    // eslint-disable-next-line no-control-regex -- the point: no control character is left raw
    assert.doesNotMatch(all, /[\u0000-\u001f]/);
    assert.match(all, /containerd\\x1b\[2J/);
    assert.match(all, /v2\.0\.1\\x0asetup/);
  });

  it('a version of 1 MB is cut to MAX_RUNTIME_TEXT characters, saying how much was cut', () => {
    const c = chooseConflistVersion('auto', rt('containerd', 'v'.repeat(1024 * 1024)));
    assert.ok(c.runtime !== undefined);
    assert.ok(c.runtime.version.length < MAX_RUNTIME_TEXT + 64, `${c.runtime.version.length} characters kept`);
    assert.match(c.runtime.version, /… \[1048376 more characters cut\]$/);
    assert.ok(JSON.stringify(c).length < 4 * MAX_RUNTIME_TEXT + 1024, `${JSON.stringify(c).length} bytes stored`);
  });

  it("a failed Version's error text is bounded and escaped too", () => {
    const c = chooseConflistVersion('auto', { error: `\u202e${'x'.repeat(5000)}`, endpoint: null });
    assert.doesNotMatch(c.reason, /\u202e/);
    assert.ok(c.reason.length < MAX_RUNTIME_TEXT + 200, c.reason.slice(0, 80));
  });
});
