// A real Prometheus server (Debian's `prometheus`) for a test: loopback only, a free port, its own
// temp config and storage dir, short scrape and evaluation intervals, killed and removed at the
// env's cleanup even when the test fails. Queried through its own HTTP API (/api/v1/...).

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { TestEnv } from './env.js';
import type { RuleGroup } from './monitoring.js';

export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface PromAlert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
  value: string;
}

export interface PromOptions {
  /** host:port targets of job "steward". */
  targets: string[];
  groups: RuleGroup[];
  intervalSeconds?: number;
}

export class Prometheus {
  readonly dir: string;
  readonly logFile: string;
  port = 0;
  private proc: ChildProcess | undefined;

  constructor(
    private readonly env: TestEnv,
    private readonly opts: PromOptions,
  ) {
    this.dir = join(env.dir, 'prometheus');
    this.logFile = join(this.dir, 'prometheus.log');
    mkdirSync(join(this.dir, 'data'), { recursive: true });
    env.defer(() => this.stop());
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts it on a free loopback port (retrying if another process took the port) and waits for /-/ready. */
  async start(): Promise<void> {
    const every = `${this.opts.intervalSeconds ?? 1}s`;
    writeFileSync(join(this.dir, 'rules.yaml'), stringify({ groups: this.opts.groups }));
    writeFileSync(
      join(this.dir, 'prometheus.yml'),
      stringify({
        global: { scrape_interval: every, evaluation_interval: every, scrape_timeout: every },
        rule_files: [join(this.dir, 'rules.yaml')],
        scrape_configs: [{ job_name: 'steward', static_configs: [{ targets: this.opts.targets }] }],
      }),
    );
    for (let attempt = 0; attempt < 3; attempt++) {
      this.port = await freeLoopbackPort();
      const log = createWriteStream(this.logFile, { flags: 'a' });
      await new Promise((r) => log.once('open', r));
      const proc = spawn(
        'prometheus',
        [
          `--config.file=${join(this.dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${join(this.dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${this.port}`,
          '--log.level=info',
        ],
        { stdio: ['ignore', log, log] },
      );
      this.proc = proc;
      const exited = new Promise<string>((r) => proc.once('exit', (code) => r(`exited ${String(code)}`)));
      proc.once('error', () => undefined);
      const deadline = Date.now() + 60_000;
      let gone: string | undefined;
      void exited.then((why) => (gone = why));
      while (Date.now() < deadline && gone === undefined) {
        try {
          const r = await fetch(`${this.url}/-/ready`, { signal: AbortSignal.timeout(2000) });
          if (r.status === 200) return;
        } catch {
          /* not yet */
        }
        await new Promise((r) => setTimeout(r, 200));
      }
      if (gone === undefined) {
        await this.stop();
        throw new Error(`prometheus not ready within 60 s; see ${this.logFile}`);
      }
      if (!/address already in use/.test(readFileSync(this.logFile, 'utf8')))
        throw new Error(`prometheus ${gone}; see ${this.logFile}`);
    }
    throw new Error(`prometheus could not get a free port; see ${this.logFile}`);
  }

  async stop(): Promise<void> {
    const p = this.proc;
    this.proc = undefined;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise<void>((r) => p.once('exit', () => r()));
    p.kill('SIGTERM');
    const killer = setTimeout(() => p.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killer);
  }

  async api(path: string): Promise<any> {
    const r = await fetch(`${this.url}${path}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await r.json()) as { status: string; data: unknown; error?: string };
    if (body.status !== 'success') throw new Error(`prometheus ${path}: ${body.error ?? r.status}`);
    return body.data;
  }

  async alerts(name: string): Promise<PromAlert[]> {
    const data = await this.api('/api/v1/alerts');
    return (data.alerts as PromAlert[]).filter((a) => a.labels.alertname === name);
  }

  /** The rule's state as /api/v1/rules reports it: inactive, pending or firing. */
  async ruleState(name: string): Promise<string | undefined> {
    const data = await this.api('/api/v1/rules?type=alert');
    for (const g of data.groups) for (const r of g.rules) if (r.name === name) return r.state as string;
    return undefined;
  }

  /** The targets' health as Prometheus sees them ("up", "down", "unknown"). */
  async targetHealth(): Promise<string[]> {
    const data = await this.api('/api/v1/targets?state=active');
    return (data.activeTargets as Array<{ health: string }>).map((t) => t.health);
  }
}
