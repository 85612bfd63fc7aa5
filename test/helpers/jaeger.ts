// A real Jaeger (v1.76.0's all-in-one `jaeger`, built by scripts/build-jaeger.sh into a cache and
// linked as .tools/jaeger) for a test: loopback only, free ports for its OTLP/HTTP receiver and its
// query API, in-memory storage, no other listener; killed at the env's cleanup (thawed first when a
// test froze it). Read through its query API (/api/traces/<traceId>, /api/traces?service=…).

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { REPO, type TestEnv } from './env.js';
import { freeLoopbackPort } from './prometheus.js';

/** Where the test finds Jaeger: STEWARD_JAEGER, else the link scripts/build-jaeger.sh makes. */
export const JAEGER = process.env.STEWARD_JAEGER ?? join(REPO, '.tools/jaeger');

/** Why Jaeger cannot run here, or undefined. */
export function jaegerSkipReason(): string | undefined {
  if (!existsSync(JAEGER)) return `${JAEGER} is missing: run \`bash scripts/build-jaeger.sh\` (scripts/setup.sh does)`;
  return undefined;
}

/** One span as Jaeger's query API gives it. */
export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: Array<{ refType: string; traceID: string; spanID: string }>;
  startTime: number;
  duration: number;
  tags: Array<{ key: string; type: string; value: unknown }>;
  processID: string;
}

export interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string; tags: Array<{ key: string; value: unknown }> }>;
}

/** A span's tags as an object. */
export function tags(s: JaegerSpan): Record<string, unknown> {
  return Object.fromEntries(s.tags.map((t) => [t.key, t.value]));
}

export class Jaeger {
  readonly dir: string;
  readonly logFile: string;
  otlpPort = 0;
  queryPort = 0;
  private proc: ChildProcess | undefined;
  private frozen = false;

  constructor(private readonly env: TestEnv) {
    this.dir = join(env.dir, 'jaeger');
    this.logFile = join(this.dir, 'jaeger.log');
    mkdirSync(this.dir, { recursive: true });
    env.defer(() => this.stop());
  }

  /** The base URL stewardd's --otlp-endpoint takes (/v1/traces is appended). */
  get otlpEndpoint(): string {
    return `http://127.0.0.1:${this.otlpPort}`;
  }

  get queryUrl(): string {
    return `http://127.0.0.1:${this.queryPort}`;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  /** Starts it on free loopback ports (again on other ones if another process took one) and waits for its query API. */
  async start(): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      this.otlpPort = await freeLoopbackPort();
      this.queryPort = await freeLoopbackPort();
      const grpcPort = await freeLoopbackPort();
      const config = join(this.dir, 'jaeger.yaml');
      writeFileSync(
        config,
        stringify({
          service: {
            extensions: ['jaeger_storage', 'jaeger_query'],
            pipelines: { traces: { receivers: ['otlp'], exporters: ['jaeger_storage_exporter'] } },
            // No listener of its own telemetry (it would take port 8888).
            telemetry: { metrics: { level: 'none' }, logs: { level: 'info' } },
          },
          extensions: {
            jaeger_query: {
              storage: { traces: 'mem' },
              http: { endpoint: `127.0.0.1:${this.queryPort}` },
              grpc: { endpoint: `127.0.0.1:${grpcPort}` },
            },
            jaeger_storage: { backends: { mem: { memory: { max_traces: 10_000 } } } },
          },
          receivers: { otlp: { protocols: { http: { endpoint: `127.0.0.1:${this.otlpPort}` } } } },
          exporters: { jaeger_storage_exporter: { trace_storage: 'mem' } },
        }),
      );
      const log = createWriteStream(this.logFile, { flags: 'a' });
      await new Promise((r) => log.once('open', r));
      const proc = spawn(JAEGER, [`--config=file:${config}`], { stdio: ['ignore', log, log] });
      this.proc = proc;
      const exited = new Promise<number | null>((r) => proc.once('exit', (c) => r(c)));
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        const early = await Promise.race([exited, new Promise((r) => setTimeout(() => r('wait'), 100))]);
        if (early !== 'wait') break;
        try {
          if ((await fetch(`${this.queryUrl}/api/services`)).ok) return;
        } catch {
          /* not yet */
        }
      }
      await this.stop();
      if (!/address already in use/.test(readFileSync(this.logFile, 'utf8'))) break;
    }
    throw new Error(`jaeger did not start; see ${this.logFile}`);
  }

  /** SIGSTOP: a collector that accepts connections and never answers. */
  freeze(): void {
    this.proc?.kill('SIGSTOP');
    this.frozen = true;
  }

  thaw(): void {
    this.proc?.kill('SIGCONT');
    this.frozen = false;
  }

  async stop(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    if (this.frozen) this.thaw();
    p.kill('SIGKILL');
    await exited;
    this.proc = undefined;
  }

  /** The trace with this id, or undefined while Jaeger does not have it. */
  async trace(traceId: string): Promise<JaegerTrace | undefined> {
    const r = await fetch(`${this.queryUrl}/api/traces/${traceId}`);
    if (r.status === 404) return undefined;
    if (!r.ok) throw new Error(`jaeger answered ${r.status}: ${await r.text()}`);
    const body = (await r.json()) as { data: JaegerTrace[] | null };
    return body.data?.[0];
  }

  /** The traces of a service whose spans carry these tags (Jaeger's search). */
  async search(service: string, tagsWanted: Record<string, string>): Promise<JaegerTrace[]> {
    const q = new URLSearchParams({ service, tags: JSON.stringify(tagsWanted), limit: '100', lookback: '1h' });
    const r = await fetch(`${this.queryUrl}/api/traces?${q}`);
    if (!r.ok) throw new Error(`jaeger answered ${r.status}: ${await r.text()}`);
    return ((await r.json()) as { data: JaegerTrace[] | null }).data ?? [];
  }
}
