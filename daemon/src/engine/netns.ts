// What a CNI_NETNS path refers to. An ADD or CHECK whose netns is not a network namespace can
// only fail, and a plugin told so fails its DEL the same way forever (issue: CNI_NETNS=/etc/passwd
// pinned a rollback for hours), so it is refused before anything is journaled; teardown passes an
// empty CNI_NETNS (which the spec allows on DEL) once the stored path is no longer a namespace.

import { readFileSync, readlinkSync, realpathSync, statfsSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { clip } from '@cni-steward/shared';

/** f_type of nsfs, the filesystem of /proc/<pid>/ns/* and of bind mounts of them (/run/netns/*). */
const NSFS_MAGIC = 0x6e736673;

/** Why `path` is not usable as an ADD/CHECK CNI_NETNS, or undefined when it is a network namespace. */
export function netnsProblem(path: string): string | undefined {
  const shown = clip(path, 200);
  if (!isAbsolute(path)) return `CNI_NETNS "${shown}" is not an absolute path`;
  let type: number;
  try {
    type = statfsSync(path).type;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code === 'ENOENT'
      ? `CNI_NETNS "${shown}" does not exist`
      : `CNI_NETNS "${shown}" cannot be inspected (${code ?? 'error'})`;
  }
  if (type !== NSFS_MAGIC) return `CNI_NETNS "${shown}" is not a network namespace`;
  // Every namespace file is on nsfs (/proc/self/ns/uts too), so the kind is asked for; refused
  // only when it is known to be another kind.
  const kind = namespaceKind(path);
  return kind === undefined || kind === 'net'
    ? undefined
    : `CNI_NETNS "${shown}" is not a network namespace (it is the ${kind} namespace kind)`;
}

/**
 * "net", "uts", "pid", …: the kind of the namespace file at `path` (on nsfs), or undefined when it
 * cannot be told. A /proc/<pid>/ns/* file names it in its link ("uts:[4026531838]"); a bind mount
 * of one (/run/netns/x) does not, but its line in mountinfo has it as the mount's root.
 */
function namespaceKind(path: string): string | undefined {
  const kindOf = (name: string) => /^([a-z_]+):\[\d+\]$/.exec(name)?.[1];
  try {
    const link = kindOf(readlinkSync(path));
    if (link !== undefined) return link;
  } catch {
    /* not a link: a bind mount */
  }
  let real: string;
  let mounts: string;
  try {
    real = realpathSync(path);
    mounts = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return undefined;
  }
  // Fields: id parent major:minor root mountpoint …; octal escapes (\040) in paths.
  const unescape = (f: string) => f.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  let kind: string | undefined;
  for (const line of mounts.split('\n')) {
    const f = line.split(' ');
    if (f.length > 4 && unescape(f[4] as string) === real) kind = kindOf(unescape(f[3] as string)) ?? kind;
  }
  return kind; // the last mount on a path is the one it shows
}

/** The netns to give a teardown DEL: the stored one while it is still a namespace, else empty. */
export function teardownNetns(stored: string): string {
  return stored !== '' && netnsProblem(stored) === undefined ? stored : '';
}
