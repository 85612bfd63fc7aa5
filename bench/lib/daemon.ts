// stewardd as a process for benchmarks: started the way a node runs it (info logs to a file, no
// debug), driven over its Unix socket with one connection per request (as each shim exec makes),
// and observed through /proc (CPU ticks, RSS) so figures are the daemon's own.

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { hintHeaders } from '@cni-steward/shared';
import type { Scratch } from './scratch.js';
import { BENCH_BIN, FIXTURE_BIN, REPO, SYSTEM_CNI_BIN } from './paths.js';
import { CLK_TCK } from './other-cpu.js';

/**
 * Extra node flags for stewardd, for profiling a benchmark, e.g.
 * BENCH_DAEMON_NODE_ARGS="--cpu-prof --cpu-prof-dir=bench-results/prof" npm run bench -- --only throughput
 */
const DAEMON_NODE_ARGS = (process.env.BENCH_DAEMON_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');

export interface CpuMs {
  /** The daemon's own user + system CPU. */
  self: number;
  /** CPU of its waited-for children (the delegate plugins it ran). */
  children: number;
}

/** Totals of stewardd's request and plugin histograms (see BenchDaemon.timeSpent). */
export interface DaemonTime {
  requestS: number;
  requests: number;
  pluginS: number;
  pluginRuns: number;
}

export interface Reply {
  status: number;
  text: string;
}

/** The environment a DaemonSet gives stewardd: ours, minus variables a node would not set. */
export function daemonEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  // Node 20 parses this CA bundle eagerly at start (~80 ms, see shared/shim-startup.md); it is set
  // on these dev machines, not in the daemon's container.
  delete env.NODE_EXTRA_CA_CERTS;
  delete env.NODE_OPTIONS;
  // Tracing is off unless a benchmark turns it on (bench/rows/tracing.ts).
  for (const k of Object.keys(env)) if (k.startsWith('OTEL_')) delete env[k];
  return env;
}

export class BenchDaemon {
  readonly socket: string;
  readonly stateDir: string;
  readonly bootIdFile: string;
  readonly logFile: string;
  proc: ChildProcess | undefined;

  /**
   * `exe`: another tree's bin/stewardd (built), for an A/B against it; `extraEnv`: added to the
   * daemon's environment (OTEL_* for the tracing row).
   */
  constructor(
    env: Scratch,
    name: string,
    private readonly args: string[] = [],
    private readonly exe: string = join(REPO, 'bin/stewardd'),
    private readonly extraEnv: Record<string, string> = {},
  ) {
    const dir = join(env.dir, name);
    mkdirSync(join(dir, 'run'), { recursive: true });
    this.socket = join(dir, 'run', 's.sock');
    this.stateDir = join(dir, 'state');
    this.bootIdFile = join(dir, 'boot_id');
    this.logFile = join(dir, 'stewardd.log');
    writeFileSync(this.bootIdFile, 'bench-boot\n');
    env.defer(() => this.kill());
  }

  get dbPath(): string {
    return join(this.stateDir, 'steward.db');
  }

  get pid(): number {
    const pid = this.proc?.pid;
    if (pid === undefined) throw new Error('stewardd is not running');
    return pid;
  }

  /** Starts stewardd and resolves with the milliseconds from spawn to /readyz answering 200. */
  async start(): Promise<number> {
    mkdirSync(this.stateDir, { recursive: true });
    const log = createWriteStream(this.logFile, { flags: 'a' });
    await new Promise((r) => log.once('open', r));
    const t0 = process.hrtime.bigint();
    const proc = spawn(
      process.execPath,
      [
        ...DAEMON_NODE_ARGS,
        this.exe,
        'run',
        '--socket',
        this.socket,
        '--state-dir',
        this.stateDir,
        '--boot-id-file',
        this.bootIdFile,
        '--bin-dir',
        SYSTEM_CNI_BIN,
        '--bin-dir',
        FIXTURE_BIN,
        '--bin-dir',
        BENCH_BIN,
        '--log-level',
        'info',
        ...this.args,
      ],
      {
        stdio: ['ignore', log, log],
        env: { ...daemonEnv(), ...this.extraEnv },
      },
    );
    this.proc = proc;
    let exited: number | null | undefined;
    proc.once('exit', (code) => {
      exited = code;
    });
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (exited !== undefined)
        throw new Error(`stewardd exited with ${String(exited)} during start; see ${this.logFile}`);
      if (existsSync(this.socket)) {
        try {
          if ((await this.request('GET', '/readyz')).status === 200) {
            log.end();
            return Number(process.hrtime.bigint() - t0) / 1e6;
          }
        } catch {
          /* not listening yet */
        }
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`stewardd did not become ready in 30 s; see ${this.logFile}`);
  }

  async stop(): Promise<void> {
    await this.signal('SIGTERM');
  }

  async kill(): Promise<void> {
    await this.signal('SIGKILL');
  }

  private async signal(sig: NodeJS.Signals): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) {
      this.proc = undefined;
      return;
    }
    const exited = new Promise((r) => p.once('exit', r));
    p.kill(sig);
    await exited;
    this.proc = undefined;
  }

  /**
   * CPU of the daemon and of its live children (the plugin spawner), as `self`; CPU of reaped
   * children (delegates, reaped by the spawner) as `children`.
   */
  cpu(): CpuMs {
    const total = { self: 0, children: 0 };
    for (const pid of [this.pid, ...childPids(this.pid)]) {
      const c = procCpu(pid);
      total.self += c.self;
      total.children += c.children;
    }
    return total;
  }

  /** Resident set now and its peak, in MiB. */
  rss(): { rssMiB: number; peakMiB: number } {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const kib = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? Number.NaN);
    return { rssMiB: kib('VmRSS') / 1024, peakMiB: kib('VmHWM') / 1024 };
  }

  /** One HTTP request on a fresh connection (agent: false), as one shim exec makes. */
  request(method: string, path: string, body?: string, extraHeaders: Record<string, string> = {}): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = { ...extraHeaders };
      if (body !== undefined) {
        headers['content-type'] = 'application/json';
        headers['content-length'] = Buffer.byteLength(body);
      }
      const req = request({ socketPath: this.socket, path, method, headers, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  /**
   * Seconds stewardd spent answering CNI requests and running delegates so far (the _sum of its
   * request and plugin histograms, all labels together), and how many of each: differenced over a
   * benchmark, they split a request into the daemon's own path and its delegates' runs.
   */
  async timeSpent(): Promise<DaemonTime> {
    const text = (await this.request('GET', '/metrics')).text;
    const total = (name: string) => {
      let sum = 0;
      for (const line of text.split('\n')) {
        if (!line.startsWith(name)) continue;
        const rest = line.slice(name.length);
        if (rest.startsWith(' ') || rest.startsWith('{')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
      return sum;
    };
    return {
      requestS: total('steward_cni_request_duration_seconds_sum'),
      requests: total('steward_cni_request_duration_seconds_count'),
      pluginS: total('steward_plugin_duration_seconds_sum'),
      pluginRuns: total('steward_plugin_duration_seconds_count'),
    };
  }

  /** POST /v1/cni with the body and hint headers the shim would send; throws unless the daemon answers 200. */
  async cni(body: string): Promise<string> {
    const wire = JSON.parse(body) as { env: Record<string, string>; config: Record<string, unknown> };
    const r = await this.request('POST', '/v1/cni', body, hintHeaders(wire.env, wire.config));
    if (r.status !== 200) throw new Error(`stewardd answered ${r.status}: ${r.text.slice(0, 300)}`);
    return r.text;
  }
}

function procCpu(pid: number): CpuMs {
  // Fields after the parenthesised comm: state is field 3; utime..cstime are fields 14..17.
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return { self: 0, children: 0 };
  }
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  const at = (field: number) => (f[field - 3] as number) * (1000 / CLK_TCK);
  return { self: at(14) + at(15), children: at(16) + at(17) };
}

/** Live direct children of a process, from /proc/<pid>/task/<tid>/children. */
function childPids(pid: number): number[] {
  const out: number[] = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (text !== '') out.push(...text.split(/\s+/).map(Number));
    }
  } catch {
    /* process gone */
  }
  return out;
}
