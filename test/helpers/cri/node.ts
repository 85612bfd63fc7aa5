// A Kubernetes node for the CRI end-to-end suite: containerd 1.6 with its CRI plugin on, everything
// in the test's temp dir (config, root, state, socket, runc root, netns mounts, CNI conf and bin
// dirs), a locally built pause image imported into k8s.io, a primary bridge + host-local + portmap
// conflist (also served unwrapped to a second runtime handler, PLAIN_HANDLER, through its own
// cni_conf_dir), and steward put on it as a node would: `stewardd install` into those dirs and
// `stewardd run --cni-conf-dir`. Undone at TestEnv.close(), with the machine-wide bits the CRI path
// leaves (portmap's top-level iptables chains, the pods' cgroup parent) removed when this made them
// (leftovers.ts).

import { mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Daemon } from '../daemon.js';
import { FIXTURE_BIN, REPO, SYSTEM_CNI_BIN } from '../env.js';
import { run, type Ran } from '../runtimes/exec.js';
import type { BridgeNet, RuntimeHost } from '../runtimes/host.js';
import { Containerd } from '../runtimes/containerd.js';
import { CriClient } from './client.js';
import { cgroupDirs, removeCgroupDirs, removePortmapChainsAtClose } from './leftovers.js';
import { buildPauseArchive } from './pause-image.js';

export const PAUSE_IMAGE = 'localhost/stw-e2e-pause:1';
/** RunPodSandbox's runtime_handler for pods on the plain primary (the CRI plugin's per-runtime cni_conf_dir). */
export const PLAIN_HANDLER = 'stw-plain';
/** Plugins the CRI plugin may exec from its bin_dir besides steward (loopback: go-cni's lo network). */
const LINKED_PLUGINS = ['bridge', 'host-local', 'portmap', 'loopback'];
/** The dir of the CRI node's containerd under the env's dir (its socket is containerd.sock there). */
const CONTAINERD_NAME = 'containerd-cri';

function writeAtomic(file: string, text: string): void {
  const tmp = join(file, '..', `.${file.split('/').pop()}.tmp`);
  writeFileSync(tmp, text);
  renameSync(tmp, file);
}

/** Sets `key = value` on the first line with that key after `section`'s header. */
function setInSection(conf: string, section: string, key: string, value: string): string {
  const start = conf.indexOf(`[${section}]\n`);
  if (start < 0) throw new Error(`containerd config has no [${section}]`);
  const re = new RegExp(`^(\\s*)${key} = .*$`, 'm');
  const tail = conf.slice(start);
  const m = re.exec(tail);
  if (!m) throw new Error(`containerd config has no ${key} under [${section}]`);
  return conf.slice(0, start) + tail.slice(0, m.index) + `${m[1]}${key} = ${value}` + tail.slice(m.index + m[0].length);
}

export interface CriNodeOptions {
  /**
   * Whether steward is installed and running before the first pod (default true). Without it the
   * CRI plugin loads the primary straight from its conf dir; `installSteward()` puts steward on later.
   */
  steward?: boolean;
  /** Extra `stewardd run` flags (e.g. the audit's --runtime-endpoint, see `auditArgs`). */
  daemonArgs?: (node: { runtimeEndpoint: string; net: BridgeNet }) => string[];
  /** Extra environment for `stewardd run` (e.g. OTEL_BSP_SCHEDULE_DELAY beside an --otlp-endpoint in daemonArgs). */
  daemonEnv?: Record<string, string>;
}

export class CriNode {
  readonly confDir: string;
  /** The conf dir of runtime handler PLAIN_HANDLER: the primary alone, never wrapped by steward. */
  readonly plainConfDir: string;
  readonly binDir: string;
  readonly net: BridgeNet;
  readonly daemon: Daemon;
  containerd!: Containerd;
  cri!: CriClient;
  readonly cgroupParent: string;
  /** containerd's CRI socket as crictl names it (unix://...), known before containerd starts. */
  readonly runtimeEndpoint: string;
  private extraChain: Array<Record<string, unknown>> = [];

  private constructor(
    readonly host: RuntimeHost,
    opts: CriNodeOptions,
  ) {
    const env = host.env;
    this.confDir = join(env.dir, 'cri-net.d');
    this.binDir = join(env.dir, 'cri-bin');
    this.plainConfDir = join(env.dir, 'cri-net.d-plain');
    mkdirSync(this.confDir, { recursive: true });
    mkdirSync(this.plainConfDir, { recursive: true });
    mkdirSync(this.binDir, { recursive: true });
    for (const p of LINKED_PLUGINS) symlinkSync(join(SYSTEM_CNI_BIN, p), join(this.binDir, p));
    symlinkSync(join(FIXTURE_BIN, 'steward-fixture'), join(this.binDir, 'steward-fixture'));
    const name = host.netName('cri');
    const subnet = host.subnet();
    this.net = {
      name,
      bridge: host.bridge(),
      subnet,
      gateway: subnet.replace(/0\/24$/, '1'),
      dataDir: join(env.dir, 'ipam'),
      file: join(this.confDir, `10-${name}.conflist`),
    };
    this.runtimeEndpoint = `unix://${join(env.dir, CONTAINERD_NAME, 'containerd.sock')}`;
    const extra = opts.daemonArgs?.({ runtimeEndpoint: this.runtimeEndpoint, net: this.net }) ?? [];
    this.daemon = new Daemon(env, {
      name: 'stewardd',
      args: ['--cni-conf-dir', this.confDir, ...extra],
      env: opts.daemonEnv ?? {},
    });
    this.cgroupParent = `/${host.netName('pods')}`;
    // libcni's result cache: "<network>-<64 hex sandbox id>-<ifname>" for steward's conflist, the
    // primary (after uninstall) and go-cni's loopback network.
    host.claimCniCache(new RegExp(`^(steward|cni-loopback|${name})-[0-9a-f]{64}-`));
    removePortmapChainsAtClose(env);
    env.defer(() => removeCgroupDirs(this.cgroupParent));
  }

  /** The node with steward installed and running, containerd's CRI plugin reporting NetworkReady. */
  static async start(host: RuntimeHost, opts: CriNodeOptions = {}): Promise<CriNode> {
    const n = new CriNode(host, opts);
    const steward = opts.steward ?? true;
    n.writePrimary();
    n.writePlain();
    if (steward) await n.putSteward();
    const archive = await buildPauseArchive(host.env.dir, PAUSE_IMAGE);
    n.containerd = await Containerd.start(host, { name: CONTAINERD_NAME, configure: (c, dir) => n.configure(c, dir) });
    if (n.containerd.address !== n.runtimeEndpoint.slice('unix://'.length))
      throw new Error(`containerd listens on ${n.containerd.address}, not ${n.runtimeEndpoint}`);
    const imp = await n.containerd.ctr(['-n', 'k8s.io', 'image', 'import', archive]);
    if (imp.code !== 0) throw new Error(`ctr -n k8s.io image import failed (${imp.code}): ${imp.stderr}`);
    n.cri = new CriClient(n.containerd.address);
    host.env.defer(() => n.cri.close());
    // Registered after containerd's own stop, so it runs first: every pod is gone before containerd.
    host.env.defer(() => n.removeAllPods());
    await n.waitForNetwork((l) => l.steward === steward && l.name === (steward ? 'steward' : n.net.name));
    return n;
  }

  /** `stewardd install` into the CRI plugin's dirs, then `stewardd run`. */
  private async putSteward(): Promise<void> {
    const inst = await this.stewardd(['install']);
    if (inst.code !== 0) throw new Error(`stewardd install exited ${inst.code}: ${inst.stderr}`);
    await this.daemon.start();
  }

  /** Steward put on a node that ran without it (or after an uninstall): install, run, wait until the CRI plugin loads it. */
  async installSteward(): Promise<void> {
    await this.putSteward();
    await this.waitForNetwork((l) => l.steward && l.name === 'steward');
  }

  /** stewardd stopped and `stewardd uninstall`ed; waits until the CRI plugin loads the primary again. */
  async uninstallSteward(): Promise<void> {
    const code = await this.daemon.stop();
    if (code !== 0) throw new Error(`stewardd exited ${code} on SIGTERM`);
    const un = await this.stewardd(['uninstall']);
    if (un.code !== 0) throw new Error(`stewardd uninstall exited ${un.code}: ${un.stderr}`);
    await this.waitForNetwork((l) => !l.steward && l.name === this.net.name);
  }

  /** The CRI plugin's settings: conf/bin dirs, sandbox image, netns and runc root in the temp dir. */
  private configure(conf: string, dir: string): string {
    const cri = 'plugins."io.containerd.grpc.v1.cri"';
    let c = conf.replace(/^disabled_plugins = .*$/m, 'disabled_plugins = []');
    c = setInSection(c, cri, 'sandbox_image', `"${PAUSE_IMAGE}"`);
    // No CAP_SYS_RESOURCE on these VMs: the sandbox's oom_score_adj -998 would fail.
    c = setInSection(c, cri, 'restrict_oom_score_adj', 'true');
    c = setInSection(c, cri, 'netns_mounts_under_state_dir', 'true');
    c = setInSection(c, cri, 'disable_apparmor', 'true');
    c = setInSection(c, `${cri}.cni`, 'bin_dir', `"${this.binDir}"`);
    c = setInSection(c, `${cri}.cni`, 'conf_dir', `"${this.confDir}"`);
    c = setInSection(c, `${cri}.containerd.runtimes.runc.options`, 'Root', `"${join(dir, 'runc')}"`);
    c = setInSection(c, `${cri}.containerd.runtimes.runc.options`, 'SystemdCgroup', 'false');
    // A second runtime handler whose pods get the primary straight from their own conf dir: the
    // plain chain alongside steward's, in the same containerd (timing and the seed 000 contrast).
    const plain = `${cri}.containerd.runtimes.${PLAIN_HANDLER}`;
    const block = [
      `        [${plain}]`,
      '          runtime_type = "io.containerd.runc.v2"',
      `          cni_conf_dir = "${this.plainConfDir}"`,
      '          cni_max_conf_num = 1',
      `          [${plain}.options]`,
      `            Root = "${join(dir, 'runc')}"`,
      '            SystemdCgroup = false',
      '',
    ].join('\n');
    const anchor = `      [${cri}.containerd.untrusted_workload_runtime]`;
    if (!c.includes(anchor)) throw new Error(`containerd config has no ${anchor}`);
    return c.replace(anchor, `${block}${anchor}`);
  }

  /** `bin/stewardd <cmd>` with this node's dirs (install, uninstall). */
  stewardd(args: string[]): Promise<Ran> {
    return run(
      process.execPath,
      [
        join(REPO, 'bin/stewardd'),
        ...args,
        '--cni-conf-dir',
        this.confDir,
        '--cni-bin-dir',
        this.binDir,
        '--state-dir',
        this.daemon.stateDir,
        ...(args[0] === 'install' ? ['--socket', this.daemon.socket] : []),
      ],
      { timeoutMs: 90_000 },
    );
  }

  /** The primary conflist the node's CNI "owns": bridge + host-local + portmap, then `extra` plugins. */
  writePrimary(extra: Array<Record<string, unknown>> = this.extraChain): void {
    this.extraChain = extra;
    writeAtomic(this.net.file, this.primaryText(extra));
  }

  /** The same network (same bridge, same host-local range and dataDir) in the plain handler's conf dir. */
  writePlain(extra: Array<Record<string, unknown>> = []): void {
    writeAtomic(join(this.plainConfDir, this.net.file.split('/').pop()!), this.primaryText(extra));
  }

  private primaryText(extra: Array<Record<string, unknown>>): string {
    const n = this.net;
    return `${JSON.stringify(
      {
        cniVersion: '1.0.0',
        name: n.name,
        plugins: [
          {
            type: 'bridge',
            bridge: n.bridge,
            isGateway: true,
            ipMasq: false,
            ipam: {
              type: 'host-local',
              dataDir: n.dataDir,
              ranges: [[{ subnet: n.subnet }]],
              routes: [{ dst: '0.0.0.0/0' }],
            },
          },
          { type: 'portmap', capabilities: { portMappings: true } },
          ...extra,
        ],
      },
      null,
      2,
    )}\n`;
  }

  /**
   * The network the CRI plugin loaded (Status verbose, info.cniconfig: go-cni's networks with each
   * conflist's source text), other than its own loopback: its name, whether it is steward's, and the
   * primary's plugins (inside steward's delegate when wrapped).
   */
  async loaded(): Promise<{
    ready: boolean;
    name?: string;
    steward: boolean;
    plugins: Array<Record<string, unknown>>;
  }> {
    const s = await this.cri.status(true);
    const ready = s.conditions.find((c) => c.type === 'NetworkReady')?.status === true;
    let conflist: any;
    try {
      const cni = JSON.parse(s.info.cniconfig ?? '{}') as {
        Networks?: Array<{ Config: { Name: string; Source: string } }>;
      };
      const net = (cni.Networks ?? []).find((n) => n.Config.Name !== 'cni-loopback');
      conflist = net ? JSON.parse(net.Config.Source) : undefined;
    } catch {
      conflist = undefined;
    }
    if (!conflist) return { ready, steward: false, plugins: [] };
    const first = conflist.plugins?.[0];
    if (first?.type === 'steward')
      return { ready, name: conflist.name, steward: true, plugins: first.delegates?.[0]?.plugins ?? [] };
    return { ready, name: conflist.name, steward: false, plugins: conflist.plugins ?? [] };
  }

  /** Polls until the CRI plugin reports NetworkReady with a loaded network satisfying `cond`. */
  async waitForNetwork(
    cond: (l: Awaited<ReturnType<CriNode['loaded']>>) => boolean,
    timeoutMs = 30_000,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    while (Date.now() < deadline) {
      const l = await this.loaded();
      last = l;
      if (l.ready && cond(l)) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(
      `the CRI plugin did not load the expected CNI config within ${timeoutMs} ms; it has: ${JSON.stringify(last).slice(0, 1500)}`,
    );
  }

  /**
   * Changes the plugins chained after bridge + portmap in the primary, and waits until the CRI plugin
   * uses exactly that chain, through steward (whose watcher rewrites 00-steward.conflist) or not.
   */
  async setChain(extra: Array<Record<string, unknown>>, opts: { steward: boolean } = { steward: true }): Promise<void> {
    this.writePrimary(extra);
    await this.waitForNetwork(
      (l) =>
        l.steward === opts.steward &&
        l.name === (opts.steward ? 'steward' : this.net.name) &&
        isDeepStrictEqual(l.plugins.slice(2), extra),
    );
  }

  /** host-local leases of the primary network. */
  leases(): string[] {
    return this.host.leases(this.net);
  }

  /** Stops and removes every sandbox containerd still has (a failed test), tolerating errors. */
  private async removeAllPods(): Promise<void> {
    const items = await this.cri.listPodSandbox().catch(() => []);
    for (const p of items) {
      await this.cri.stopPodSandbox(p.id).catch(() => undefined);
      await this.cri.removePodSandbox(p.id).catch(() => undefined);
    }
  }

  /** The pods' cgroup parent in each hierarchy (runc removes the pods' own cgroups, not the parent). */
  cgroupDirs(): string[] {
    return cgroupDirs(this.cgroupParent);
  }
}
