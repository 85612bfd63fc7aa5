// Executing a CNI plugin (the shim, or a delegate run directly) as a runtime does: CNI_* variables
// in the environment, the netconf on stdin; the exit code and stdout come back.

import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cniVars } from './netconf.js';

export interface Executed {
  code: number | null;
  stdout: string;
}

export function execCni(file: string, env: Record<string, string>, stdin: string): Promise<Executed> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, [], { env, stdio: ['pipe', 'pipe', 'ignore'] });
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
