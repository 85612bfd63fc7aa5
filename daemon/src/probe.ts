// `stewardd probe`: the kubelet's exec probe, one GET on the daemon's socket. It runs every few
// seconds in the daemon's own cgroup, so it loads nothing else: no logger, no journal driver, no
// schema validator (loading main.ts's commands cost 0.15 s of CPU and 79 MiB a run, more than the
// pod's CPU request at the DaemonSet's probe periods; test/unit/probe-weight.test.ts).

import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { DEFAULT_SOCKET } from '@cni-steward/shared';
import { fail, int } from './flags.js';
import { socketRequest } from './lifecycle/socket-http.js';

export const PROBE_USAGE = `usage: stewardd probe [--socket PATH] [--timeout SEC] [URL-PATH]
  GET URL-PATH on the daemon socket (default /readyz; /healthz for liveness, any GET route works);
  exit 0 on HTTP 200, 1 otherwise (for kubelet exec probes)`;

export function parseProbeArgs(argv: string[]): { socket: string; path: string; timeoutMs: number } {
  const { values, positionals } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: true,
    options: { socket: { type: 'string' }, timeout: { type: 'string' } },
  });
  const problems: string[] = [];
  const path = positionals[0] ?? '/readyz';
  if (positionals.length > 1 || !path.startsWith('/')) problems.push('give one path starting with "/"');
  const timeoutMs = int('timeout', values.timeout, 3, 1, problems) * 1000;
  fail(problems, PROBE_USAGE);
  return { socket: resolve(values.socket ?? DEFAULT_SOCKET), path, timeoutMs };
}

export async function runProbe(o: { socket: string; path: string; timeoutMs: number }): Promise<number> {
  try {
    const r = await socketRequest(o.socket, 'GET', o.path, o.timeoutMs);
    console.log(`${r.status} ${r.body}`);
    return r.status === 200 ? 0 : 1;
  } catch (e) {
    console.log(`${o.path}: ${(e as Error).message}`);
    return 1;
  }
}
