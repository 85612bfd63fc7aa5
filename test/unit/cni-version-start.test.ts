// The conflist's cniVersion decided again at a daemon's start (lifecycle/commands.ts decideAtStart,
// wired by daemon.ts to the primary watcher's chooseVersion): a runtime that does not answer leaves
// the record's choice alone; more than one runtime socket (manyRuntimes) is the primary's version,
// no runtime asked, at install and at a restart alike.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { pino } from 'pino';

import type { RuntimeSource } from '../../daemon/src/audit/runtime.js';
import type { ConflistVersionChoice } from '../../daemon/src/lifecycle/cni-version.js';
import { decideAtStart, decideCniVersion } from '../../daemon/src/lifecycle/commands.js';

const log = pino({ level: 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'stw-cniver-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A runtime answering `answer` to Version, counting the questions. */
function runtime(answer: Awaited<ReturnType<RuntimeSource['version']>>): RuntimeSource & { asked: number } {
  const r = {
    asked: 0,
    listSandboxes: () => Promise.resolve(null),
    version: () => {
      r.asked++;
      return Promise.resolve(answer);
    },
    info: () => ({}) as ReturnType<RuntimeSource['info']>,
    close: () => undefined,
  };
  return r;
}
const silent = () => runtime({ error: 'no answer within 10000 ms', endpoint: '/run/containerd/containerd.sock' });
const containerd2 = () =>
  runtime({ name: 'containerd', version: 'v2.0.1', endpoint: '/run/containerd/containerd.sock' });

/** Socket paths of which `present` exist (plain files: existence is all that is looked at). */
function sockets(name: string, present: number): string[] {
  const paths = [join(dir, `${name}-containerd.sock`), join(dir, `${name}-crio.sock`)];
  for (const p of paths.slice(0, present)) writeFileSync(p, '');
  return paths;
}

async function atStart(
  mode: Parameters<typeof decideAtStart>[0],
  endpoint: string | undefined,
  rt: RuntimeSource,
  socks: string[],
): Promise<{ decided: ConflistVersionChoice; applied: ConflistVersionChoice[] }> {
  const applied: ConflistVersionChoice[] = [];
  const decided = await decideAtStart(mode, endpoint, log, rt, (c) => applied.push(c), socks);
  return { decided, applied };
}

describe('the conflist version at a daemon start', () => {
  it('auto, the runtime does not answer: nothing applied, the record’s choice (say 1.1.0) stays', async () => {
    const rt = silent();
    const { decided, applied } = await atStart('auto', undefined, rt, sockets('silent', 1));
    assert.equal(rt.asked, 1);
    assert.deepEqual(applied, []);
    assert.equal(decided.version, null);
    assert.match(decided.reason, /the runtime did not say what it is \(no answer within 10000 ms\)/);
  });

  it('auto, the runtime answers: its choice applied (containerd 2.0.1: 1.1.0)', async () => {
    const { applied } = await atStart('auto', undefined, containerd2(), sockets('answers', 1));
    assert.deepEqual(
      applied.map((c) => c.version),
      ['1.1.0'],
    );
  });

  it('an explicit mode is applied whether or not the runtime answers', async () => {
    const { applied } = await atStart('1.0.0', undefined, silent(), sockets('explicit', 1));
    assert.deepEqual(
      applied.map((c) => [c.mode, c.version]),
      [['1.0.0', '1.0.0']],
    );
  });

  it('auto with two runtime sockets: no runtime asked, the primary’s version applied, both sockets named', async () => {
    const rt = containerd2();
    const socks = sockets('two', 2);
    const { decided, applied } = await atStart('auto', undefined, rt, socks);
    assert.equal(rt.asked, 0, 'a runtime that would say 2.0.1 is not asked: the other may be older');
    assert.equal(decided.version, null);
    assert.deepEqual(decided.runtimeSockets, socks);
    assert.match(decided.reason, new RegExp(`more than one runtime socket exists \\(${socks.join(', ')}\\)`));
    assert.deepEqual(applied, [decided], 'a conflist at 1.1.0 from a one-runtime install is put back at the primary’s');
  });

  it('two runtime sockets but --runtime-endpoint given, or only one socket: that runtime is asked', async () => {
    const rt = containerd2();
    const byEndpoint = await atStart('auto', 'unix:///run/containerd/containerd.sock', rt, sockets('endpoint', 2));
    assert.equal(rt.asked, 1);
    assert.equal(byEndpoint.decided.version, '1.1.0');
    const one = await decideCniVersion('auto', undefined, log, containerd2(), 100, sockets('one', 1));
    assert.equal(one.version, '1.1.0');
    assert.equal(one.runtimeSockets, undefined);
  });
});
