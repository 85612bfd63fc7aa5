// Running a plugin executable on a "host without Node.js": PATH holds only an empty dir, and in a
// private mount namespace /usr/bin/node (which /bin/node links to) is covered with /dev/null, so
// neither a PATH lookup nor an absolute path can reach a Node runtime.

import { realpathSync } from 'node:fs';
import { execPlugin, type ShimAnswer } from './shim.js';

const NODE = realpathSync(process.execPath);

export async function execWithoutNode(
  file: string,
  env: Record<string, string>,
  stdin: string,
  emptyDir: string,
): Promise<ShimAnswer> {
  const script =
    '/usr/bin/mount --bind /dev/null "$1" && shift && node_gone=$(command -v node || true) && [ -z "$node_gone" ] && exec "$@"';
  const r = await execPlugin('/usr/bin/unshare', { ...env, PATH: emptyDir }, stdin, [
    '--mount',
    '--propagation',
    'private',
    '/bin/sh',
    '-c',
    script,
    'sh',
    NODE,
    file,
  ]);
  if (r.code !== 0 && r.stdout === '') throw new Error(`ran nothing (exit ${r.code}): ${r.stderr}`);
  return { code: r.code, stdout: r.stdout, json: r.json };
}
