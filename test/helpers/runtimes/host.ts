// RuntimeHost: the shared part of every e2e suite, under the machine lock (lock.ts). It snapshots the
// machine (machine.ts), gives out bridge names, free subnets and conflists in /etc/cni/net.d that
// carry the suite's mark and tag, links the shim into a temp bin dir, builds the busybox rootfs
// (host-files.ts), and at finish() undoes it all and lists the residue. Per-runtime setup is
// podman.ts and containerd.ts (and ../cri/node.ts for the CRI node).

import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { FIXTURE_BIN, type TestEnv } from '../env.js';
import { quiet } from './exec.js';
import { buildBusyboxRootfs, shimExecutable } from './host-files.js';
import { acquireMachineLock } from './lock.js';
import {
  CNI_CACHE,
  CNI_CONF_DIR,
  E2E_MARK,
  listDir,
  machineDiff,
  mountsUnder,
  processesMentioning,
  removeStaleFiles,
  restoreMachineState,
  snapshot,
  type MachineState,
} from './machine.js';

export interface BridgeNet {
  /** The network name the runtime knows (the conflist's `name`). */
  name: string;
  bridge: string;
  subnet: string;
  gateway: string;
  /** host-local's dataDir; leases are in dataDir/<ipam network name>. */
  dataDir: string;
  file: string;
}

export function ipv4Of(text: string): { address: string; prefix: number } | undefined {
  const m = /inet (\d+\.\d+\.\d+\.\d+)\/(\d+)/.exec(text);
  return m ? { address: m[1]!, prefix: Number(m[2]) } : undefined;
}

export function defaultGatewayOf(text: string): string | undefined {
  return /default via (\d+\.\d+\.\d+\.\d+)/.exec(text)?.[1];
}

let seq = 0;

/** The shared part: temp bin dir with the shim, busybox rootfs, machine snapshot and cleanup. */
export class RuntimeHost {
  readonly tag: string;
  readonly binDir: string;
  readonly rootfs: string;
  readonly shim = shimExecutable();
  private readonly before: MachineState;
  private readonly bridges: string[] = [];
  private readonly networkNames: string[] = [];
  /** Cache entries (file names) matching these and absent when they were registered are ours. */
  private readonly cacheMatchers: Array<{ re: RegExp; before: Set<string> }> = [];

  private release: (() => void) | undefined;
  private finished: Promise<string[]> | undefined;

  /** Waits for the machine lock, then sets up; `finish()` undoes it all and releases the lock. */
  static async create(env: TestEnv): Promise<RuntimeHost> {
    const release = await acquireMachineLock();
    try {
      const h = new RuntimeHost(env);
      h.release = release;
      return h;
    } catch (e) {
      await env.close();
      release();
      throw e;
    }
  }

  private constructor(readonly env: TestEnv) {
    this.tag = env.tag;
    removeStaleFiles();
    this.before = snapshot();
    env.defer(() => this.restoreMachine());
    this.binDir = join(env.dir, 'cni-bin');
    mkdirSync(this.binDir, { recursive: true });
    symlinkSync(this.shim.path, join(this.binDir, 'steward'));
    symlinkSync(join(FIXTURE_BIN, 'steward-fixture'), join(this.binDir, 'steward-fixture'));
    this.rootfs = join(env.dir, 'rootfs');
    buildBusyboxRootfs(this.rootfs);
  }

  /** A bridge name (<= 15 bytes) deleted at close. */
  bridge(): string {
    const name = `se2e${this.tag}${(seq++).toString(36)}`.slice(0, 15);
    this.bridges.push(name);
    this.env.defer(() => void quiet('ip', ['link', 'del', name]));
    return name;
  }

  /** A /24 in 172.29.0.0/16 that no route on this machine uses yet. */
  subnet(): string {
    const routes = quiet('ip', ['-4', 'route', 'show', 'table', 'all']) ?? '';
    for (let i = 0; i < 256; i++) {
      const n = ((process.pid * 13 + seq++ * 7) % 250) + 2;
      const net = `172.29.${n}.`;
      if (!routes.includes(net)) return `${net}0/24`;
    }
    throw new Error('no free 172.29.x.0/24 for a test bridge');
  }

  /** Writes a conflist into /etc/cni/net.d (atomically) and removes it at close. */
  writeConflist(fileName: string, conflist: { name: string }): string {
    if (!fileName.includes(`${E2E_MARK}-${this.tag}`))
      throw new Error(`conflist ${fileName} must carry ${E2E_MARK}-${this.tag}`);
    mkdirSync(CNI_CONF_DIR, { recursive: true });
    const file = join(CNI_CONF_DIR, fileName);
    const tmp = join(CNI_CONF_DIR, `.${fileName}.tmp`);
    writeFileSync(tmp, `${JSON.stringify(conflist, null, 2)}\n`);
    renameSync(tmp, file);
    this.networkNames.push(conflist.name);
    this.env.defer(() => rmSync(file, { force: true }));
    return file;
  }

  /** Names for a network and its conflist, all carrying the suite's mark and tag. */
  netName(what: string): string {
    return `${E2E_MARK}-${this.tag}-${what}`;
  }

  /** A bridge + host-local network, wrapped by steward (`socket` given) or listed directly. */
  bridgeNetwork(
    what: string,
    cniVersion: string,
    opts: {
      /** `type`: the name the shim is installed under (default `steward`, in the temp bin dir). */
      steward?: { socket: string; spoolDir: string; type?: string };
      /** Plugins chained after the bridge (e.g. the fault fixture). */
      chain?: unknown[];
      filePrefix?: string;
    } = {},
  ): BridgeNet {
    const name = this.netName(what);
    const bridge = this.bridge();
    const subnet = this.subnet();
    const gateway = subnet.replace(/0\/24$/, '1');
    const dataDir = join(this.env.dir, 'ipam', what);
    const plugins = [
      {
        type: 'bridge',
        bridge,
        isGateway: true,
        ipMasq: false,
        ipam: { type: 'host-local', dataDir, ranges: [[{ subnet }]], routes: [{ dst: '0.0.0.0/0' }] },
      },
      ...(opts.chain ?? []),
    ];
    const conflist = opts.steward
      ? {
          cniVersion,
          name,
          plugins: [
            {
              type: opts.steward.type ?? 'steward',
              socket: opts.steward.socket,
              spoolDir: opts.steward.spoolDir,
              delegates: [{ cniVersion, name, plugins }],
            },
          ],
        }
      : { cniVersion, name, plugins };
    const file = this.writeConflist(`${opts.filePrefix ?? '90-'}${name}.conflist`, conflist);
    return { name, bridge, subnet, gateway, dataDir, file };
  }

  /**
   * Claims libcni result-cache entries (/var/lib/cni/results/<network>-<container id>-<ifname>) whose
   * names match `re` and that do not exist yet: removed at close, reported by residue() if left.
   * For networks whose conflists are not written by writeConflist (the CRI suite's own conf dir).
   */
  claimCniCache(re: RegExp): void {
    this.cacheMatchers.push({ re, before: new Set(listDir(CNI_CACHE) ?? []) });
  }

  private ownsCacheEntry(f: string): boolean {
    return (
      this.networkNames.some((n) => f.startsWith(`${n}-`)) ||
      this.cacheMatchers.some((m) => m.re.test(f) && !m.before.has(f))
    );
  }

  /** host-local leases of a network (the IPAM network name is the conflist/delegate name). */
  leases(net: BridgeNet): string[] {
    const dir = join(net.dataDir, net.name);
    return (listDir(dir) ?? []).filter((f) => f !== 'lock' && !f.startsWith('last_reserved_ip'));
  }

  private restoreMachine(): void {
    // libcni leaves its result cache behind when a DEL fails (the leak case): ours carry the names.
    for (const f of listDir(CNI_CACHE) ?? []) {
      if (this.ownsCacheEntry(f)) rmSync(join(CNI_CACHE, f), { force: true });
    }
    for (const m of mountsUnder(this.env.dir)) quiet('umount', ['-l', m]);
    restoreMachineState(this.before);
  }

  /**
   * Closes the env (every deferred cleanup), then lists what differs from the machine as it was
   * found, then releases the machine lock. Idempotent: [] means the run left the machine clean.
   */
  finish(): Promise<string[]> {
    this.finished ??= (async () => {
      try {
        this.keepLogs();
        await this.env.close();
        return this.residue();
      } finally {
        this.release?.();
      }
    })();
    return this.finished;
  }

  /** STEWARD_E2E_LOG_DIR=DIR keeps stewardd's and containerd's logs (the temp dir is removed). */
  private keepLogs(): void {
    const dest = process.env.STEWARD_E2E_LOG_DIR;
    if (!dest) return;
    mkdirSync(dest, { recursive: true });
    const walk = (dir: string): string[] =>
      (listDir(dir) ?? []).flatMap((e) => {
        const p = join(dir, e);
        try {
          const st = lstatSync(p);
          if (st.isDirectory()) return dir.includes('/podman/') || e === 'podman' || e === 'rootfs' ? [] : walk(p);
          return st.isFile() && e.endsWith('.log') ? [p] : [];
        } catch {
          return [];
        }
      });
    for (const f of walk(this.env.dir)) {
      const name = f.slice(this.env.dir.length + 1).replaceAll('/', '_');
      writeFileSync(join(dest, `${this.env.dir.split('/').pop()}_${name}`), readFileSync(f));
    }
  }

  /** Everything that differs from the machine as it was found; [] when the suite left it clean. */
  residue(): string[] {
    const out = machineDiff(this.before, snapshot());
    for (const b of this.bridges) if (quiet('ip', ['link', 'show', b]) !== undefined) out.push(`link ${b} left behind`);
    for (const f of listDir(CNI_CACHE) ?? []) {
      if (this.ownsCacheEntry(f)) out.push(`${CNI_CACHE}/${f} left behind`);
    }
    out.push(...processesMentioning(this.env.dir).map((p) => `process left running: ${p}`));
    out.push(...mountsUnder(this.env.dir).map((m) => `mount left: ${m}`));
    if (existsSync(this.env.dir)) out.push(`temp dir ${this.env.dir} left behind`);
    return out;
  }
}
