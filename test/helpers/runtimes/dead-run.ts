// A run of the e2e suite that dies before its cleanup, for test/e2e/stale-run.test.ts: run as its own
// process, it sets up as the suites do (the machine lock, a conflist, the podman drop-in, the shim in
// /opt/cni/bin, and where the node has none, the DaemonSet test's install of stewardd into
// /etc/cni/net.d, /opt/cni/bin and /var/lib/steward), prints what it put where as one JSON line, and
// waits for its kill -9.

import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TestEnv } from '../env.js';
import { installInto } from '../node-tree.js';
import { installShimInOptCniBin } from './containerd.js';
import { RuntimeHost } from './host.js';
import {
  CNI_CONF_DIR,
  DROP_IN,
  NODE_E2E_MARK,
  NODE_INSTALL,
  NODE_RUN_DIR,
  NODE_STATE_DIR,
  OPT_CNI_BIN,
} from './machine.js';
import { Podman } from './podman.js';

const env = new TestEnv('e2e-dead');
const host = await RuntimeHost.create(env);
await Podman.setup(host);
const shim = installShimInOptCniBin(host);
if ('reason' in shim) throw new Error(shim.reason);
const net = host.bridgeNetwork('dead', '1.0.0', {
  steward: { socket: join(env.dir, 'stewardd.sock'), spoolDir: join(env.dir, 'spool'), type: shim.type },
});
const planted = [DROP_IN, join(OPT_CNI_BIN, shim.type), net.file];

if (![...NODE_INSTALL, NODE_E2E_MARK].some((p) => existsSync(p))) {
  // 10-… sorts before 90-…: the primary install wraps is this one, as in the DaemonSet test.
  const name = host.netName('primary');
  const primary = host.writeConflist(`10-${name}.conflist`, {
    cniVersion: '1.0.0',
    name,
    plugins: [{ type: 'loopback' }],
  } as { name: string });
  writeFileSync(NODE_E2E_MARK, `${process.pid}\n`); // as the DaemonSet test does
  const tree = { root: '/', confDir: CNI_CONF_DIR, binDir: OPT_CNI_BIN, stateDir: NODE_STATE_DIR };
  const r = await installInto(tree, join(NODE_RUN_DIR, 'stewardd.sock'));
  if (r.code !== 0) throw new Error(`stewardd install: ${r.stderr}`);
  planted.push(primary, ...NODE_INSTALL, NODE_E2E_MARK);
}

process.stdout.write(`${JSON.stringify({ dir: env.dir, planted })}\n`);
setInterval(() => undefined, 60_000);
