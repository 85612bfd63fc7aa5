// containerd 1.6 as a child process with root, state and socket in the env's temp dir, driven by
// `ctr` (`ctr run --cni` uses go-cni: /opt/cni/bin/steward and the lexically first conf). The CRI
// suite's node configures it further (../cri/node.ts).

import { spawn, type ChildProcess } from 'node:child_process';
import {
  createWriteStream,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  rmSync,
  rmdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { run, type Ran } from './exec.js';
import type { RuntimeHost } from './host.js';
import { CNI_CONF_DIR, OPT_CNI_BIN, listDir, processesMentioning } from './machine.js';

export class Containerd {
  readonly dir: string;
  readonly address: string;
  readonly logFile: string;
  private proc: ChildProcess | undefined;

  private constructor(
    readonly host: RuntimeHost,
    name = 'containerd',
  ) {
    this.dir = join(host.env.dir, name);
    this.address = join(this.dir, 'containerd.sock');
    this.logFile = join(this.dir, 'containerd.log');
  }

  /**
   * `containerd config default` with root, state, grpc.address and the opt plugin's path moved into
   * the temp dir (and the CRI plugin off: ctr does not need it), started as a background child;
   * stopped at close. `opts.configure` edits the config text further (the CRI suite keeps the CRI
   * plugin on: test/helpers/cri/node.ts); `opts.name` names the dir under the env's.
   */
  static async start(
    host: RuntimeHost,
    opts: { name?: string; configure?: (conf: string, dir: string) => string } = {},
  ): Promise<Containerd> {
    const c = new Containerd(host, opts.name);
    mkdirSync(c.dir, { recursive: true });
    const def = await run('containerd', ['config', 'default']);
    if (def.code !== 0) throw new Error(`containerd config default failed: ${def.stderr}`);
    let conf = def.stdout
      .replace(/^root = .*$/m, `root = "${join(c.dir, 'root')}"`)
      .replace(/^state = .*$/m, `state = "${join(c.dir, 'state')}"`)
      .replace(/^disabled_plugins = .*$/m, 'disabled_plugins = ["io.containerd.grpc.v1.cri"]');
    conf = conf.replace(/(\[grpc\][^[]*?\n\s*address = )"[^"]*"/, `$1"${c.address}"`);
    // The opt plugin would otherwise create /opt/containerd.
    conf = conf.replace(/path = "\/opt\/containerd"/, `path = "${join(c.dir, 'opt')}"`);
    if (!conf.includes(`"${c.address}"`)) throw new Error("could not set grpc.address in containerd's default config");
    if (opts.configure) conf = opts.configure(conf, c.dir);
    const confFile = join(c.dir, 'config.toml');
    writeFileSync(confFile, conf);
    const log = createWriteStream(c.logFile, { flags: 'a' });
    await new Promise((r) => log.once('open', r));
    const proc = spawn('containerd', ['--config', confFile], { stdio: ['ignore', log, log] });
    c.proc = proc;
    host.env.defer(() => c.stop());
    const exited = new Promise<string>((r) => proc.once('exit', (code) => r(`containerd exited with ${code}`)));
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const early = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('wait'), 100))]);
      if (early !== 'wait') throw new Error(`${early}: ${readFileSync(c.logFile, 'utf8').slice(-500)}`);
      if (existsSync(c.address) && (await c.ctr(['version'], 10_000)).code === 0) return c;
    }
    throw new Error(`containerd did not answer on ${c.address}; see ${c.logFile}`);
  }

  ctr(args: string[], timeoutMs = 120_000): Promise<Ran> {
    return run('ctr', ['--address', this.address, ...args], { timeoutMs });
  }

  private async stop(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    // Leftover containers of ours (a failed test), in every namespace (the CRI plugin's is k8s.io):
    // kill their tasks and delete them first.
    const nss = await this.ctr(['namespaces', 'list', '--quiet'], 20_000).catch(() => undefined);
    for (const ns of (nss?.stdout ?? '').split('\n').filter((l) => l !== '')) {
      const ls = await this.ctr(['-n', ns, 'containers', 'list', '--quiet'], 20_000).catch(() => undefined);
      for (const id of (ls?.stdout ?? '').split('\n').filter((l) => l !== '')) {
        await this.ctr(['-n', ns, 'task', 'kill', '--signal', 'SIGKILL', id], 20_000).catch(() => undefined);
        await this.ctr(['-n', ns, 'task', 'delete', '--force', id], 20_000).catch(() => undefined);
        await this.ctr(['-n', ns, 'containers', 'delete', id], 20_000).catch(() => undefined);
      }
    }
    const exited = new Promise<void>((r) => p.once('exit', () => r()));
    p.kill('SIGTERM');
    const timer = setTimeout(() => p.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
    this.proc = undefined;
    // Shims outlive containerd by design; ours are identified by our socket address.
    for (const line of processesMentioning(this.address)) {
      const pid = Number(line.split(':')[0]);
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }
}

/**
 * Installs the shim where go-cni looks, /opt/cni/bin, under a name carrying the suite's mark
 * (`stw-e2e-<tag>-steward`, a symlink to the shim), and removes it at close with /opt/cni/bin and
 * /opt/cni if this made them. Never `steward` itself: a node's own install (`stewardd install`, the
 * image test) keeps that name, and this suite must neither replace it nor refuse to run beside it.
 * Returns the plugin type for the conflist, or why it cannot run.
 */
export function installShimInOptCniBin(host: RuntimeHost): { type: string } | { reason: string } {
  const type = host.netName('steward');
  const target = join(OPT_CNI_BIN, type);
  try {
    lstatSync(target);
    return { reason: `${target} already exists: not replacing it` };
  } catch {
    /* free: the usual case */
  }
  const madeOpt = !existsSync('/opt/cni');
  const madeBin = !existsSync(OPT_CNI_BIN);
  mkdirSync(OPT_CNI_BIN, { recursive: true });
  symlinkSync(host.shim.path, target);
  host.env.defer(() => {
    rmSync(target, { force: true });
    try {
      if (madeBin) rmdirSync(OPT_CNI_BIN);
      if (madeOpt) rmdirSync('/opt/cni');
    } catch {
      /* something else was put there meanwhile: leave it */
    }
  });
  return { type };
}

/** go-cni (ctr run --cni) loads the lexically first *.conf, *.conflist or *.json in the conf dir. */
export function lexicallyFirstConf(): string | undefined {
  return (listDir(CNI_CONF_DIR) ?? []).filter((f) => /\.(conf|conflist|json)$/.test(f)).sort()[0];
}
