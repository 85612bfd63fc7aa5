// A netconf's numbers reach the delegates as written (daemon/src/faithful-json.ts). A double holds
// neither 9007199254740993 nor 1e400: parsed and written back by JavaScript they became
// 9007199254740992 and null, so a Go plugin saw another value, or a silent zero, where run directly it
// would read the exact int64 or refuse the overflow. Each way a netconf reaches a plugin is tried:
// the shim's ADD, CHECK and DEL (the DEL tears down from the journal's copy), an ADD over curl's
// path (fastify's POST /v1/cni), and a DEL the shim spooled while stewardd was down.
// Real stewardd, the shim executed as a process, the fixture plugin keeping its stdin as received.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { TestEnv } from '../helpers/env.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { cniEnv, shim } from '../helpers/shim.js';
import { until } from '../helpers/processes.js';

const env = new TestEnv('numbers');
const daemon = new Daemon(env, { name: 'numbers' });
before(() => daemon.start());
after(async () => {
  await daemon.stop();
  await env.close();
});

/** Keys and the source text of numbers a double cannot hold, with one it can for contrast. */
const NUMBERS: Record<string, string> = {
  past2to53: '9007199254740993',
  negativeBig: '-12345678901234567890',
  overflow: '1e400',
  negativeOverflow: '-1E+400',
  underflow: '1e-400',
  negativeZero: '-0',
  plain: '1.5',
};

/** The netconf text, each placeholder string replaced by its number's source text. */
function confText(fx: string, network: string): string {
  const placeholders = Object.fromEntries(Object.keys(NUMBERS).map((k) => [k, `@${k}@`]));
  const conf = stewardConf(daemon.socket, '1.0.0', [
    delegate(network, '1.0.0', [fixturePlugin(fx, { recordStdin: true, numbers: placeholders })]),
  ]);
  return Object.entries(NUMBERS).reduce((t, [k, n]) => t.replace(`"@${k}@"`, n), JSON.stringify(conf));
}

/** The "numbers" object of the stdin the plugin received, as text. */
function seen(fx: string, command: string, containerId: string): string {
  const text = readFileSync(join(fx, `stdin-${command}-${containerId}.json`), 'utf8');
  const at = text.indexOf('"numbers":');
  assert.ok(at >= 0, `no "numbers" in ${text}`);
  return text.slice(at, text.indexOf('}', at) + 1);
}

/** What the plugin must see: every number as written (1.5 is a double's own text too). */
const written = `"numbers":{${Object.entries(NUMBERS)
  .map(([k, n]) => `"${k}":${n}`)
  .join(',')}}`;

describe('numbers in a netconf', () => {
  it('reach the plugin as written on the shim’s ADD, CHECK and DEL (DEL from the journal’s copy)', async () => {
    const fx = join(env.dir, 'fx-shim');
    const conf = confText(fx, 'numnet');
    const netns = env.netns();
    const add = await shim({ command: 'ADD', containerId: 'num-1', netns }, conf);
    assert.equal(add.code, 0, add.stdout);
    assert.equal(seen(fx, 'ADD', 'num-1'), written);
    const check = await shim({ command: 'CHECK', containerId: 'num-1', netns }, conf);
    assert.equal(check.code, 0, check.stdout);
    assert.equal(seen(fx, 'CHECK', 'num-1'), written);
    // The DEL's own netconf says otherwise: teardown runs what the ADD journaled.
    const del = await shim(
      { command: 'DEL', containerId: 'num-1', netns },
      confText(fx, 'numnet').replace('9007199254740993', '7'),
    );
    assert.equal(del.code, 0, del.stdout);
    assert.equal(seen(fx, 'DEL', 'num-1'), written);
  });

  it('reach the plugin as written from curl’s path (POST /v1/cni without the shim’s hints)', async () => {
    const fx = join(env.dir, 'fx-curl');
    const conf = confText(fx, 'numcurl');
    const netns = env.netns();
    const wire = (command: string) => {
      const { PATH: _path, ...cni } = cniEnv({ command, containerId: 'num-2', netns });
      return `{"env":${JSON.stringify(cni)},"config":${conf}}`;
    };
    const add = await daemon.request('POST', '/v1/cni', wire('ADD'), { 'content-type': 'application/json' });
    assert.equal(add.status, 200, add.text);
    assert.equal(seen(fx, 'ADD', 'num-2'), written);
    const del = await daemon.request('POST', '/v1/cni', wire('DEL'), { 'content-type': 'application/json' });
    assert.equal(del.status, 200, del.text);
    assert.equal(seen(fx, 'DEL', 'num-2'), written);
    // Where stewardd expects an object, such a number is a number, refused as one (a kept one would pass for an object).
    const timeouts = await daemon.request(
      'POST',
      '/v1/cni',
      wire('ADD').replace('"delegates":', '"timeouts":1e400,"delegates":'),
      {
        'content-type': 'application/json',
      },
    );
    assert.equal(timeouts.json.code, 7, timeouts.text);
    assert.match(timeouts.json.msg, /\/timeouts must be object/);
    // What the default parser refused, this one refuses the same way.
    for (const body of ['', '{"env":', '\ufeff']) {
      const r = await daemon.request('POST', '/v1/cni', body, { 'content-type': 'application/json' });
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
    }
  });

  it('reach the plugin as written from a DEL the shim spooled while stewardd was down', async () => {
    const fx = join(env.dir, 'fx-spool');
    const conf = confText(fx, 'numspool');
    await daemon.stop();
    try {
      const del = await shim({ command: 'DEL', containerId: 'num-3', netns: '' }, conf);
      assert.equal(del.code, 0, del.stdout);
    } finally {
      await daemon.start();
    }
    const file = join(fx, 'stdin-DEL-num-3.json');
    await until('the spooled DEL to run', () => existsSync(file), 20_000);
    assert.equal(seen(fx, 'DEL', 'num-3'), written);
  });
});
