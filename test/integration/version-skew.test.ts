// Shim/daemon version skew with a real older build: the last commit before the protocol version
// existed is checked out in a git worktree, built (tsc -b), and its shim and stewardd run against
// today's stewardd and shim. Either way the answer is a CNI error naming both versions, never a result.
// That release's shim was TypeScript: it runs here under Node from its tsc output (shim/dist/main.js),
// the same code its bundle held. Today's shim is the Go binary (bin/steward runs dist/steward).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { REPO, SYSTEM_CNI_BIN, TestEnv, fixtureCalls } from '../helpers/env.js';
import { delegate, fixturePlugin, stewardConf } from '../helpers/netconf.js';
import { SHIM, cniEnv, execPlugin } from '../helpers/shim.js';

const env = new TestEnv('version-skew');
const old = join(env.dir, 'old');
const oldShim = join(env.dir, 'old-steward');
let oldDaemon: Daemon;
let newDaemon: Daemon;

const git = (...args: string[]) => execFileSync('git', ['-C', REPO, ...args], { encoding: 'utf8' }).trim();

before(async () => {
  // The parent of the commit that introduced PROTOCOL_HEADER: the previous release's wire contract.
  const intro = git('log', '--format=%H', '--reverse', '-S', "PROTOCOL_HEADER = '", '--', 'shared/src/api.ts').split(
    '\n',
  )[0]!;
  git('worktree', 'add', '--detach', old, `${intro}^`);
  env.defer(() => void git('worktree', 'remove', '--force', old));
  // node_modules: this tree's packages, but the workspace links point into the old tree.
  mkdirSync(join(old, 'node_modules', '@cni-steward'), { recursive: true });
  for (const e of readdirSync(join(REPO, 'node_modules'))) {
    if (e !== '@cni-steward') symlinkSync(join(REPO, 'node_modules', e), join(old, 'node_modules', e));
  }
  for (const w of ['shared', 'daemon', 'shim']) symlinkSync(join(old, w), join(old, 'node_modules', '@cni-steward', w));
  execFileSync(process.execPath, [join(REPO, 'node_modules/typescript/bin/tsc'), '-b', 'shim', 'daemon'], { cwd: old });
  // Its bin/steward ran a bundle made with Bun and esbuild; its tsc output is the same program.
  writeFileSync(
    oldShim,
    `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(old, 'shim/dist/main.js'))}\n`,
    {
      mode: 0o755,
    },
  );
  oldDaemon = new Daemon(env, { name: 'old-daemon', exe: join(old, 'bin/stewardd') });
  newDaemon = new Daemon(env, { name: 'new-daemon' });
  await oldDaemon.start();
  await newDaemon.start();
});
after(() => env.close());

function call(shim: string, daemon: Daemon, command: string, cid: string, fx: string) {
  const conf = stewardConf(daemon.socket, '1.0.0', [delegate('skewnet', '1.0.0', [fixturePlugin(fx)])]);
  return execPlugin(
    shim,
    cniEnv({ command, containerId: cid, netns: env.netns(), path: SYSTEM_CNI_BIN }),
    JSON.stringify(conf),
  );
}

describe('shim and stewardd from different releases', { timeout: 600_000 }, () => {
  it("the previous release's shim against today's stewardd: code 108 naming protocols 1 and 2, nothing run", async () => {
    const fx = join(env.dir, 'fx-old-shim');
    const r = await call(oldShim, newDaemon, 'ADD', 'old-shim', fx);
    assert.equal(r.code, 1, r.stdout);
    assert.equal(r.json.code, 108);
    assert.match(r.json.msg, /shim speaks protocol 1 .*stewardd speaks protocol 2.*roll the stewardd DaemonSet/);
    assert.deepEqual(fixtureCalls(fx), []);
    const m = await newDaemon.get('/metrics');
    assert.match(m.text, /steward_version_skew_seen_total\{shim_protocol="1"\} [1-9]/);
  });

  it("today's shim against the previous release's stewardd: code 108 for ADD (what it allocated undone), 50 for STATUS, naming both", async () => {
    const fx = join(env.dir, 'fx-new-shim');
    const add = await call(SHIM, oldDaemon, 'ADD', 'new-shim', fx);
    assert.equal(add.code, 1, add.stdout);
    assert.equal(add.json.code, 108);
    assert.match(
      add.json.msg,
      /this shim speaks protocol 2, stewardd .* speaks protocol 1 .*roll the stewardd DaemonSet.*the ADD it carried out was undone/,
    );
    assert.equal(add.json.ips, undefined, 'no result printed');
    // The previous stewardd ran the delegate's ADD before its answer showed the skew; the runtime,
    // told the ADD failed, sends no DEL: the shim's own DEL undid it, so nothing stays allocated.
    assert.deepEqual(
      fixtureCalls(fx).map((l) => l.split(' ')[0]),
      ['ADD', 'DEL'],
    );
    const left = (await oldDaemon.get('/v1/attachments?containerId=new-shim')).json as Array<{ state: string }>;
    assert.deepEqual(
      left.map((a) => a.state),
      ['deleted'],
    );
    const status = await call(SHIM, oldDaemon, 'STATUS', '', fx);
    assert.equal(status.json.code, 50, status.stdout);
    assert.match(status.json.msg, /version skew/);
  });

  it("today's shim against today's stewardd still works", async () => {
    const fx = join(env.dir, 'fx-same');
    const add = await call(SHIM, newDaemon, 'ADD', 'same', fx);
    assert.equal(add.code, 0, add.stdout);
    const del = await call(SHIM, newDaemon, 'DEL', 'same', fx);
    assert.equal(del.code, 0, del.stdout);
  });
});
