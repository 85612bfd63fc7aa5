// Running a plugin executable on a "host without Node.js": PATH holds only an empty dir, and in a
// private mount namespace /usr/bin/node (which /bin/node links to) is covered with /dev/null, so
// neither a PATH lookup nor an absolute path can reach a Node runtime.

import { spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import type { ShimAnswer } from './shim.js';

const NODE = realpathSync(process.execPath);

export function execWithoutNode(file: string, env: Record<string, string>, stdin: string, emptyDir: string): Promise<ShimAnswer> {
  return new Promise((resolve, reject) => {
    const script = '/usr/bin/mount --bind /dev/null "$1" && shift && node_gone=$(command -v node || true) && [ -z "$node_gone" ] && exec "$@"';
    const child = spawn('/usr/bin/unshare', ['--mount', '--propagation', 'private', '/bin/sh', '-c',
      script, 'sh', NODE, file], { env: { ...env, PATH: emptyDir }, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.stdin.on('error', () => undefined);
    child.on('close', (code) => {
      const stdout = Buffer.concat(out).toString('utf8');
      let json: unknown;
      try { json = stdout ? JSON.parse(stdout) : undefined; } catch { json = undefined; }
      if (code !== 0 && stdout === '') return reject(new Error(`ran nothing (exit ${code}): ${Buffer.concat(err).toString('utf8')}`));
      resolve({ code, stdout, json });
    });
    child.stdin.end(stdin);
  });
}
