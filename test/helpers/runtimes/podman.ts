// podman 4.3 with the CNI backend, as ../shared/runtimes.md measured it: --root/--runroot/
// --tmpdir in the env's temp dir, and a drop-in in /etc/containers/containers.conf.d removed at close.

import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SYSTEM_CNI_BIN } from '../env.js';
import { run, type Ran } from './exec.js';
import type { RuntimeHost } from './host.js';
import { CNI_CONF_DIR, DROP_IN, DROP_IN_DIR, DROP_IN_HEADER, OPT_CNI_BIN } from './machine.js';

async function hardLimits(): Promise<{ nofile: string; nproc: string }> {
  const r = await run('sh', ['-c', 'ulimit -Hn; ulimit -Hu']);
  const [n, u] = r.stdout.trim().split('\n');
  const nofile = n === undefined || n === 'unlimited' ? '1048576' : n;
  const nproc = u === undefined || u === 'unlimited' ? 32768 : Math.min(Number(u), 32768);
  return { nofile, nproc: String(nproc) };
}

export class Podman {
  readonly root: string;
  readonly runroot: string;
  readonly tmp: string;

  private constructor(readonly host: RuntimeHost) {
    const base = join(host.env.dir, 'podman');
    this.root = join(base, 'root');
    this.runroot = join(base, 'runroot');
    this.tmp = join(base, 'tmp');
    for (const d of [this.root, this.runroot, this.tmp]) mkdirSync(d, { recursive: true });
  }

  /**
   * The drop-in runtimes.md requires (CNI backend, runc, cgroupfs, file events, ulimits), with the
   * temp bin dir holding `steward` first in cni_plugin_dirs (or `pluginDirs`); removed at close.
   */
  static async setup(host: RuntimeHost, opts: { pluginDirs?: string[] } = {}): Promise<Podman> {
    const p = new Podman(host);
    const { nofile, nproc } = await hardLimits();
    mkdirSync(DROP_IN_DIR, { recursive: true });
    host.env.defer(() => rmSync(DROP_IN, { force: true }));
    writeFileSync(
      DROP_IN,
      [
        `${DROP_IN_HEADER} (test/helpers/runtimes/podman.ts) for one run; removed when it ends.`,
        '[containers]',
        `default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]`,
        '',
        '[engine]',
        'runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        '',
        '[network]',
        'network_backend = "cni"',
        `network_config_dir = "${CNI_CONF_DIR}"`,
        `cni_plugin_dirs = [${(opts.pluginDirs ?? [host.binDir, OPT_CNI_BIN, SYSTEM_CNI_BIN]).map((d) => `"${d}"`).join(', ')}]`,
        '',
      ].join('\n'),
    );
    // Registered after the drop-in, so it runs before its removal: no container of ours survives.
    host.env.defer(async () => {
      await p.cmd(['rm', '--all', '--force', '--time', '0'], 60_000).catch(() => undefined);
    });
    return p;
  }

  cmd(args: string[], timeoutMs = 120_000): Promise<Ran> {
    return run('podman', ['--root', this.root, '--runroot', this.runroot, '--tmpdir', this.tmp, ...args], {
      timeoutMs,
    });
  }

  /** `podman run --rm --network NET --rootfs ROOTFS:O [extra] CMD...` (foreground). */
  runRm(network: string, command: string[], extra: string[] = [], timeoutMs = 120_000): Promise<Ran> {
    return this.cmd(
      ['run', '--rm', '--network', network, ...extra, '--rootfs', `${this.host.rootfs}:O`, ...command],
      timeoutMs,
    );
  }

  /** Starts a detached container that sleeps; returns its id. */
  async runDetached(network: string, name: string): Promise<string> {
    const r = await this.cmd([
      'run',
      '-d',
      '--rm',
      '--name',
      name,
      '--network',
      network,
      '--rootfs',
      `${this.host.rootfs}:O`,
      '/bin/sleep',
      '600',
    ]);
    if (r.code !== 0) throw new Error(`podman run -d exited ${r.code}: ${r.stderr}`);
    return r.stdout.trim();
  }

  async exists(id: string): Promise<boolean> {
    const r = await this.cmd(['container', 'exists', id]);
    return r.code === 0;
  }

  /** Why podman cannot run a container here (after setup), or undefined. */
  async probe(): Promise<string | undefined> {
    const r = await this.runRm('none', ['/bin/true'], [], 60_000);
    if (r.code === 0) return undefined;
    return `podman cannot run a container here (exit ${r.code}): ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`;
  }

  /** A local image of the busybox rootfs, saved as an OCI archive (for ctr image import). */
  async ociArchive(ref: string): Promise<string> {
    const tar = join(this.host.env.dir, 'rootfs.tar');
    const archive = join(this.host.env.dir, 'image.oci.tar');
    const t = await run('tar', ['-C', this.host.rootfs, '-cf', tar, '.']);
    if (t.code !== 0) throw new Error(`tar failed: ${t.stderr}`);
    for (const args of [
      ['import', tar, ref],
      ['save', '--format', 'oci-archive', '-o', archive, ref],
    ]) {
      const r = await this.cmd(args);
      if (r.code !== 0) throw new Error(`podman ${args[0]} failed (${r.code}): ${r.stderr}`);
    }
    return archive;
  }
}
