// What a CNI_NETNS path refers to. An ADD or CHECK whose netns is not a network namespace can
// only fail, and a plugin told so fails its DEL the same way forever (issue: CNI_NETNS=/etc/passwd
// pinned a rollback for hours), so it is refused before anything is journaled; teardown passes an
// empty CNI_NETNS (which the spec allows on DEL) once the stored path is no longer a namespace.

import { statfsSync } from 'node:fs';
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
  return type === NSFS_MAGIC ? undefined : `CNI_NETNS "${shown}" is not a network namespace`;
}

/** The netns to give a teardown DEL: the stored one while it is still a namespace, else empty. */
export function teardownNetns(stored: string): string {
  return stored !== '' && netnsProblem(stored) === undefined ? stored : '';
}
