// Running the real stewardd as a process on a real Unix socket, the way a node would, and
// talking to it with plain HTTP over that socket (as curl --unix-socket does).

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { FIXTURE_BIN, REPO, SYSTEM_CNI_BIN, type TestEnv } from './env.js';

export interface DaemonOptions {
  /** Extra `stewardd run` flags. */
  args?: string[];
  /** Subdirectory of the env's dir, so one test file can run several daemons. */
  name?: string;
  bootId?: string;
  /** Another socket path than <home>/run/stewardd.sock. */
  socket?: string;
  /** Another state dir than <home>/state (e.g. another daemon's, to try to share it). */
  stateDir?: string;
  /** Another stewardd entry script than the checkout's bin/stewardd (e.g. a copy of the tree). */
  exe?: string;
  /** Extra environment for the daemon process (e.g. the test-only STEWARD_TEST_CLOCK_OFFSET_MS). */
  env?: Record<string, string>;
  /**
   * A command that execs the rest of its arguments, run in front of stewardd (e.g. setpriv dropping a
   * capability); it must exec, not fork, so the process's pid is stewardd's.
   */
  launcher?: string[];
}

export class Daemon {
  readonly socket: string;
  readonly stateDir: string;
  readonly spoolDir: string;
  readonly bootIdFile: string;
  readonly logFile: string;
  proc: ChildProcess | undefined;
  private readonly args: string[];
  private readonly exe: string;
  private readonly launcher: string[];
  /** Extra environment for the next start (settable between restarts). */
  extraEnv: Record<string, string>;
  /** Extra `stewardd run` flags for the next start, after the constructor's (settable between restarts). */
  extraArgs: string[] = [];

  constructor(
    private readonly env: TestEnv,
    opts: DaemonOptions = {},
  ) {
    const home = join(env.dir, opts.name ?? '');
    this.socket = opts.socket ?? join(home, 'run', 'stewardd.sock');
    this.stateDir = opts.stateDir ?? join(home, 'state');
    this.spoolDir = join(this.stateDir, 'spool');
    this.bootIdFile = join(home, 'boot_id');
    this.logFile = join(home, 'stewardd.log');
    mkdirSync(home, { recursive: true });
    writeFileSync(this.bootIdFile, `${opts.bootId ?? 'boot-1'}\n`);
    this.args = opts.args ?? [];
    this.exe = opts.exe ?? join(REPO, 'bin/stewardd');
    this.launcher = opts.launcher ?? [];
    this.extraEnv = opts.env ?? {};
    env.defer(() => this.kill9());
  }

  setBootId(id: string): void {
    writeFileSync(this.bootIdFile, `${id}\n`);
  }

  /**
   * Starts a stewardd that is expected to refuse to run: waits for it to exit (never asks its
   * socket, which may be another daemon's) and returns its exit code and what it logged.
   */
  async startExpectingExit(timeoutMs = 30_000): Promise<{ code: number | null; log: string }> {
    const proc = await this.spawnProc();
    const code = await Promise.race([
      new Promise<number | null>((r) => proc.once('exit', (c) => r(c))),
      new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), timeoutMs)),
    ]);
    if (code === 'timeout')
      throw new Error(`stewardd kept running, but it was expected to refuse to start; see ${this.logFile}`);
    this.proc = undefined;
    return { code, log: readFileSync(this.logFile, 'utf8') };
  }

  private async spawnProc(): Promise<ChildProcess> {
    mkdirSync(this.stateDir, { recursive: true });
    const log = createWriteStream(this.logFile, { flags: 'a' });
    await new Promise((r) => log.once('open', r));
    const [program, ...launcherArgs] = [...this.launcher, process.execPath];
    const proc = spawn(
      program as string,
      [
        ...launcherArgs,
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
        '--log-level',
        'debug',
        ...this.args,
        ...this.extraArgs,
      ],
      {
        stdio: ['ignore', log, log],
        env: { ...process.env, ...this.extraEnv },
      },
    );
    // A launcher that cannot be started (not installed) fails the start that asked for it, not the file.
    proc.once('error', (e) => log.write(`cannot start stewardd: ${e.message}\n`));
    this.proc = proc;
    return proc;
  }

  /** Starts stewardd and waits until `probe` (/readyz, or /healthz for a daemon that will never be ready) answers 200. */
  async start(timeoutMs = 20_000, probe: '/readyz' | '/healthz' = '/readyz'): Promise<void> {
    const proc = await this.spawnProc();
    const exited = new Promise<number | null>((r) => {
      proc.once('exit', (code) => r(code));
      proc.once('error', () => r(null)); // never started: no 'exit' follows
    });
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const early = await Promise.race([exited, new Promise((r) => setTimeout(() => r('wait'), 50))]);
      if (early !== 'wait') throw new Error(`stewardd exited with ${String(early)} during start; see ${this.logFile}`);
      if (existsSync(this.socket)) {
        try {
          if ((await this.get(probe)).status === 200) return;
        } catch {
          /* not yet */
        }
      }
    }
    throw new Error(`stewardd did not become ready; see ${this.logFile}`);
  }

  /** Sends `sig` and does not wait (a signal while it starts: startExpectingExit waits for the exit). */
  send(sig: NodeJS.Signals): void {
    this.proc?.kill(sig);
  }

  /** SIGTERM and wait for exit. */
  async stop(): Promise<number | null> {
    return this.signal('SIGTERM');
  }

  /** kill -9: no cleanup at all, as a crash or OOM kill would leave it. */
  async kill9(): Promise<void> {
    await this.signal('SIGKILL');
  }

  private async signal(sig: NodeJS.Signals): Promise<number | null> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return p?.exitCode ?? null;
    const exited = new Promise<number | null>((r) => p.once('exit', (code) => r(code)));
    p.kill(sig);
    const code = await exited;
    this.proc = undefined;
    return code;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  request(
    method: string,
    path: string,
    body?: string,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; text: string; json: any; headers: Record<string, string | string[] | undefined> }> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          socketPath: this.socket,
          path,
          method,
          headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let json: unknown;
            try {
              json = JSON.parse(text);
            } catch {
              json = undefined;
            }
            resolve({ status: res.statusCode ?? 0, text, json, headers: res.headers });
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  get(path: string) {
    return this.request('GET', path);
  }

  /** The newest attachment of a container, as /v1/attachments shows it (steps included). */
  async attachment(containerId: string): Promise<any> {
    return (await this.get(`/v1/attachments?containerId=${encodeURIComponent(containerId)}`)).json[0];
  }

  async status(): Promise<any> {
    return (await this.get('/v1/status')).json;
  }

  /**
   * A STATUS of `conf` sent to stewardd without the shim's 750 ms bound, so that its delegates'
   * verdict is decided, cached (5 s) and in the beacon before a test sends STATUS through the shim:
   * a Node fixture delegate can take longer than that bound just to start on a loaded machine.
   * Returns the HTTP status (200 ready, 503 not).
   */
  async decideStatus(conf: unknown): Promise<number> {
    const body = JSON.stringify({ env: { CNI_COMMAND: 'STATUS', CNI_PATH: '/usr/lib/cni' }, config: conf });
    return (await this.request('POST', '/v1/cni', body)).status;
  }

  /** Polls until `cond` holds, or fails with `what`. */
  async waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (await cond()) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`timed out waiting for ${what}`);
  }
}

/** Retry intervals short enough that backoff plays out within a test (base 100 ms, cap 400 ms). */
export const FAST_RETRY = ['--retry-base-ms', '100', '--retry-max-ms', '400'];

/** A started daemon in env/<name> with FAST_RETRY (or the flags given instead). */
export async function startDaemon(env: TestEnv, name: string, args: string[] = FAST_RETRY): Promise<Daemon> {
  const d = new Daemon(env, { name, args });
  await d.start();
  return d;
}
