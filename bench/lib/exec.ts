// Executing a CNI plugin (the shim, or a delegate run directly) as a runtime does: CNI_* variables
// in the environment, the netconf on stdin; the exit code and stdout come back.

import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { hintHeaders } from '@cni-steward/shared';
import { FAKE_NETNS, cniVars, wireBody } from './netconf.js';

export interface Executed {
  code: number | null;
  stdout: string;
}

export function execCni(
  file: string,
  env: Record<string, string>,
  stdin: string,
  args: string[] = [],
): Promise<Executed> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['pipe', 'pipe', 'ignore'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.once('error', reject);
    child.stdin.on('error', () => undefined); // a plugin may exit without reading stdin
    child.once('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8') }));
    child.stdin.end(stdin);
  });
}

/** The environment of one call: PATH for the plugin's own lookups, then the CNI_* variables. */
export function callEnv(command: string, containerId: string, netns: string): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', ...cniVars(command, containerId, netns) };
}

/** Addresses host-local still leases in dataDir/network: its files named after an IP. */
export function leasedAddresses(dataDir: string, network: string): string[] {
  try {
    return readdirSync(join(dataDir, network)).filter((f) => /^[0-9a-f.:]+$/i.test(f) && /[.:]/.test(f));
  } catch {
    return [];
  }
}

/**
 * One request as a `curl --unix-socket` process sends it (an executed C client, the floor of any
 * executed client): the body and hint headers the shim would send, the body on stdin. -f: an HTTP
 * error exits non-zero.
 */
export function curlCall(
  socket: string,
  command: string,
  containerId: string,
  conf: Record<string, unknown>,
  netns = FAKE_NETNS,
): { file: string; args: string[]; stdin: string } {
  const hints = hintHeaders(cniVars(command, containerId, netns), conf);
  const headers = Object.entries({ ...hints, 'content-type': 'application/json' }).flatMap(([k, v]) => [
    '-H',
    `${k}: ${v}`,
  ]);
  return {
    file: 'curl',
    args: [
      '-sS',
      '-f',
      '-o',
      '/dev/null',
      '--unix-socket',
      socket,
      ...headers,
      '--data-binary',
      '@-',
      'http://localhost/v1/cni',
    ],
    stdin: wireBody(command, containerId, conf, netns),
  };
}
