// CRI-O's CNI call sequence at start-up, played exactly as CRI-O's code makes it, against a real
// stewardd, the shim executed as a process, Debian's bridge + host-local (real leases) and the
// fixture plugin standing in for a primary that implements CNI 1.1 GC. CRI-O is not packaged here:
// the sequence is read from cri-o/cri-o (internal/config/cnimgr/cnimgr.go, server/server.go,
// server/sandbox_network.go) and cri-o/ocicni (pkg/ocicni/ocicni.go with the libcni it vendors):
//  1. cnimgr polls STATUS every 500 ms until it succeeds (ocicni StatusWithContext: libcni
//     GetStatusNetworkList on the default network, the first file of the conf dir; nothing is run
//     below cniVersion 1.1.0). Pod creation waits for that success.
//  2. Only then the start-up GC that server.go asked for runs (cnimgr defers it until STATUS first
//     succeeds): ocicni GC loads every file of the conf dir as a network (the first of a name wins)
//     and runs libcni GCNetworkList on each with the attachments (container id, ifname) of the pods
//     CRI-O knows on that network name. GCNetworkList first DELs the attachments in libcni's own
//     cache that are not listed (this CRI-O's cache is empty: both attachments below were made
//     before it), then, at cniVersion 1.1.0 or later, runs GC on every plugin of the file with name,
//     cniVersion, cni.dev/valid-attachments and cni.dev/attachments injected into its config, and
//     CNI_COMMAND=GC with every other CNI_* variable empty but CNI_PATH.
//  3. Then pods: networkStart runs SetUpPodWithContext (ADD on the default network, ifname eth0,
//     CNI_ARGS IgnoreUnknown=1;K8S_POD_NAMESPACE;K8S_POD_NAME;K8S_POD_INFRA_CONTAINER_ID;K8S_POD_UID)
//     and at once GetPodNetworkStatusWithContext, which is CHECK (libcni CheckNetworkList, with the
//     ADD's cached result as prevResult) when the network's cniVersion is 0.4.0 or later.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { FIXTURE_BIN, REPO, SYSTEM_CNI_BIN, TestEnv, leases, linkExists } from '../helpers/env.js';
import { execPlugin, shim } from '../helpers/shim.js';

const env = new TestEnv('crio');
after(() => env.close());

/** CRI-O's plugin dirs: the checkout's shim, the fixtures, Debian's plugins. */
const PLUGIN_DIRS = [join(REPO, 'bin'), FIXTURE_BIN, SYSTEM_CNI_BIN];

interface NetworkList {
  name: string;
  cniVersion: string;
  plugins: Array<Record<string, unknown>>;
  disableGC?: boolean;
}

interface Pod {
  namespace: string;
  name: string;
  uid: string;
  /** The sandbox id: CNI_CONTAINERID. */
  id: string;
  netns: string;
}

const atLeast = (v: string, min: string): boolean => {
  const p = (s: string) => s.split('.').map(Number);
  const [a, b] = [p(v), p(min)];
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
  return true;
};

/** What CRI-O (ocicni + libcni) does with a conf dir, one method per call it makes. */
class CrioPlayer {
  constructor(private readonly confDir: string) {}

  /** ocicni loadNetworks: every .conf/.conflist/.json by name; a .conf becomes a one-plugin list; first of a name wins. */
  networks(): NetworkList[] {
    const out: NetworkList[] = [];
    const files = readdirSync(this.confDir)
      .filter((f) => ['.conf', '.conflist', '.json'].some((x) => f.endsWith(x)))
      .sort();
    for (const f of files) {
      const raw = JSON.parse(readFileSync(join(this.confDir, f), 'utf8')) as Record<string, unknown>;
      const list: NetworkList = Array.isArray(raw.plugins)
        ? (raw as unknown as NetworkList)
        : { name: raw.name as string, cniVersion: raw.cniVersion as string, plugins: [raw] };
      if (!out.some((n) => n.name === list.name)) out.push(list);
    }
    return out;
  }

  /** libcni FindInPath. */
  private find(type: string): string {
    for (const d of PLUGIN_DIRS) if (readdirSync(d).includes(type)) return join(d, type);
    throw new Error(`plugin ${type} not in ${PLUGIN_DIRS.join(':')}`);
  }

  /** libcni invoke: the plugin's config with name and cniVersion (and more) injected; every CNI_* set, maybe empty. */
  private exec(
    list: NetworkList,
    plugin: Record<string, unknown>,
    command: string,
    rt: { containerId?: string; netns?: string; ifname?: string; args?: string },
    inject: Record<string, unknown> = {},
  ) {
    return execPlugin(
      this.find(plugin.type as string),
      {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        CNI_COMMAND: command,
        CNI_CONTAINERID: rt.containerId ?? '',
        CNI_NETNS: rt.netns ?? '',
        CNI_ARGS: rt.args ?? '',
        CNI_IFNAME: rt.ifname ?? '',
        CNI_PATH: PLUGIN_DIRS.join(':'),
      },
      JSON.stringify({ ...plugin, name: list.name, cniVersion: list.cniVersion, ...inject }),
    );
  }

  /** cnimgr's start-up STATUS: the default network's plugins, in order, stopping at the first failure. */
  async status(): Promise<{ ok: boolean; code: number | null; stdout: string }> {
    const def = this.networks()[0] as NetworkList;
    if (!atLeast(def.cniVersion, '1.1.0')) return { ok: true, code: 0, stdout: '' };
    for (const p of def.plugins) {
      const r = await this.exec(def, p, 'STATUS', {});
      if (r.code !== 0) return { ok: false, code: r.code, stdout: r.stdout };
    }
    return { ok: true, code: 0, stdout: '' };
  }

  /** ocicni GC: every network, each with the attachments of the valid pods on it (all on the default network, eth0). */
  async gc(validPods: Pod[]): Promise<Array<{ network: string; plugin: string; code: number | null; stdout: string }>> {
    const nets = this.networks();
    const def = nets[0] as NetworkList;
    const out = [];
    for (const net of nets) {
      if (net.disableGC) continue;
      const valid = net.name === def.name ? validPods.map((p) => ({ containerID: p.id, ifname: 'eth0' })) : [];
      if (!atLeast(net.cniVersion, '1.1.0')) continue;
      for (const p of net.plugins) {
        const r = await this.exec(
          net,
          p,
          'GC',
          {},
          { 'cni.dev/valid-attachments': valid, 'cni.dev/attachments': valid },
        );
        out.push({ network: net.name, plugin: p.type as string, code: r.code, stdout: r.stdout });
      }
    }
    return out;
  }

  /** networkStart: ADD on the default network, then at once CHECK (>= 0.4.0) with the ADD's result as prevResult. */
  async runPodSandbox(
    pod: Pod,
  ): Promise<{ add: Awaited<ReturnType<typeof execPlugin>>; check?: Awaited<ReturnType<typeof execPlugin>> }> {
    const def = this.networks()[0] as NetworkList;
    const rt = {
      containerId: pod.id,
      netns: pod.netns,
      ifname: 'eth0',
      args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${pod.namespace};K8S_POD_NAME=${pod.name};K8S_POD_INFRA_CONTAINER_ID=${pod.id};K8S_POD_UID=${pod.uid}`,
    };
    let prevResult: unknown;
    let add!: Awaited<ReturnType<typeof execPlugin>>;
    for (const p of def.plugins) {
      add = await this.exec(def, p, 'ADD', rt, prevResult === undefined ? {} : { prevResult });
      if (add.code !== 0) return { add };
      prevResult = add.json;
    }
    if (!atLeast(def.cniVersion, '0.4.0')) return { add };
    let check!: Awaited<ReturnType<typeof execPlugin>>;
    for (const p of def.plugins) {
      check = await this.exec(def, p, 'CHECK', rt, { prevResult });
      if (check.code !== 0) break;
    }
    return { add, check };
  }
}

describe("CRI-O's start-up sequence", () => {
  it('STATUS polled until success, then GC per conf file releasing only the unlisted attachment, then ADD and at once CHECK', async () => {
    // --restart-grace 0: stewardd is down here, not restarting (a SIGTERM would otherwise leave a
    // restart record that keeps STATUS ready for the grace: restart-grace.test.ts).
    const daemon = new Daemon(env, { name: 'crio', args: ['--restart-grace', '0'] });
    const confDir = join(env.dir, 'net.d');
    mkdirSync(confDir, { recursive: true });
    const dataDir = join(env.dir, 'crio-ipam');
    const fx = join(env.dir, 'crio-fx');
    const subnet = env.subnet();
    // The primary (bridge + host-local, CNI 1.0.0) and a second network whose plugin implements
    // CNI 1.1 GC: each keeps its own file, as `stewardd install` leaves the primary's; steward's
    // conflist comes first by name and wraps both as delegates.
    const podnet = {
      cniVersion: '1.0.0',
      name: 'podnet',
      plugins: [
        {
          type: 'bridge',
          bridge: env.bridge(),
          isGateway: true,
          ipMasq: false,
          ipam: { type: 'host-local', dataDir, ranges: [[{ subnet }]], routes: [{ dst: '0.0.0.0/0' }] },
        },
      ],
    };
    const gcnet = { cniVersion: '1.1.0', name: 'gcnet', plugins: [{ type: 'steward-fixture', stateDir: fx }] };
    writeFileSync(join(confDir, '10-podnet.conflist'), JSON.stringify(podnet));
    writeFileSync(join(confDir, '20-gcnet.conflist'), JSON.stringify(gcnet));
    writeFileSync(
      join(confDir, '00-steward.conflist'),
      JSON.stringify({
        cniVersion: '1.1.0',
        name: 'steward',
        plugins: [{ type: 'steward', socket: daemon.socket, spoolDir: daemon.spoolDir, delegates: [podnet, gcnet] }],
      }),
    );
    const crio = new CrioPlayer(confDir);
    assert.deepEqual(
      crio.networks().map((n) => n.name),
      ['steward', 'podnet', 'gcnet'],
    );

    // Before this CRI-O: two pods attached (its libcni cache lost, say); only `listed` is still a pod.
    await daemon.start();
    const stewardConf = crio.networks()[0] as NetworkList;
    const conf = { ...stewardConf.plugins[0], name: 'steward', cniVersion: '1.1.0' };
    const listed: Pod = { namespace: 'default', name: 'web', uid: 'u-web', id: 'crio-listed', netns: env.netns() };
    const stale = { id: 'crio-stale', netns: env.netns() };
    for (const p of [listed, stale])
      assert.equal((await shim({ command: 'ADD', containerId: p.id, netns: p.netns }, conf)).code, 0);
    assert.equal(leases(dataDir, 'podnet').length, 2);
    await daemon.stop();

    // 1. CRI-O starts while stewardd is down: STATUS fails, polled every 500 ms until it succeeds.
    const polls: Array<number | null> = [];
    let restarted: Promise<void> | undefined;
    for (;;) {
      const s = await crio.status();
      polls.push(s.code);
      if (s.ok) break;
      restarted ??= daemon.start();
      await new Promise((r) => setTimeout(r, 500));
      if (polls.length > 60) assert.fail(`STATUS never succeeded: ${JSON.stringify(polls)} ${s.stdout}`);
    }
    await restarted;
    assert.notEqual(polls[0], 0, 'STATUS fails while stewardd is down');
    assert.equal(polls.at(-1), 0);

    // 2. The deferred start-up GC, to every network of the conf dir.
    const gc = await crio.gc([listed]);
    assert.deepEqual(
      gc.map((g) => [g.network, g.plugin, g.code]),
      [
        ['steward', 'steward', 0],
        ['gcnet', 'steward-fixture', 0],
      ],
      JSON.stringify(gc),
    );
    // Steward released the unlisted attachment (its lease and interface) and kept the listed one.
    assert.equal((await daemon.attachment(stale.id)).state, 'deleted');
    assert.equal((await daemon.attachment(listed.id)).state, 'added');
    assert.equal(leases(dataDir, 'podnet').length, 1);
    assert.equal(linkExists(stale.netns, 'eth0'), false);
    assert.equal(linkExists(listed.netns, 'eth0'), true);
    // The GC-implementing delegate got GC twice: from steward, listing what steward still holds on
    // it (under the delegate's ifname), and from CRI-O directly for its own file, listing nothing:
    // CRI-O knows no pod on network "gcnet" (its pods are on "steward").
    const gcCalls = readdirSync(fx)
      .filter((f) => f.startsWith('gc-'))
      .sort()
      .map((f) => JSON.parse(readFileSync(join(fx, f), 'utf8')));
    assert.deepEqual(gcCalls, [[{ containerID: listed.id, ifname: 'net1' }], []]);

    // 3. A pod: ADD followed at once by CHECK, with CRI-O's CNI_ARGS.
    const pod: Pod = { namespace: 'default', name: 'api', uid: 'u-api', id: 'crio-new', netns: env.netns() };
    const { add, check } = await crio.runPodSandbox(pod);
    assert.equal(add.code, 0, add.stdout);
    assert.equal(add.json.cniVersion, '1.1.0');
    assert.equal(check?.code, 0, check?.stdout);
    assert.equal(leases(dataDir, 'podnet').length, 2);
    const a = await daemon.attachment(pod.id);
    assert.deepEqual([a.state, a.podNamespace, a.podName, a.podUid], ['added', 'default', 'api', 'u-api']);

    for (const p of [listed, pod])
      assert.equal((await shim({ command: 'DEL', containerId: p.id, netns: p.netns }, conf)).code, 0);
    assert.equal(leases(dataDir, 'podnet').length, 0);
    await daemon.stop();
  });
});
