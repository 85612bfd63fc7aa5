// What a CNI_NETNS path refers to. An ADD or CHECK whose netns is not a network namespace can
// only fail, and a plugin told so fails its DEL the same way forever (issue: CNI_NETNS=/etc/passwd
// pinned a rollback for hours), so it is refused before anything is journaled; teardown passes an
// empty CNI_NETNS (which the spec allows on DEL) once the stored path is no longer a namespace.

import { readlinkSync, realpathSync, statSync, statfsSync, type Stats } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname, isAbsolute, normalize, resolve } from 'node:path';
import { clip } from '@cni-steward/shared';
import { processStartTime } from '../plugins/process-group.js';

/** f_type of nsfs, the filesystem of /proc/<pid>/ns/* and of bind mounts of them (/run/netns/*). */
const NSFS_MAGIC = 0x6e736673;

/**
 * Why `path` is not usable as an ADD/CHECK CNI_NETNS, or undefined when it is a network namespace
 * other than `host` (a path of the host's, when given).
 */
export async function netnsProblem(path: string, host?: string): Promise<string | undefined> {
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
  let ns: Stats;
  try {
    ns = statSync(path);
  } catch (e) {
    return `CNI_NETNS "${shown}" cannot be inspected (${(e as NodeJS.ErrnoException).code ?? 'error'})`;
  }
  // Every namespace file is on nsfs (/proc/self/ns/uts too), so the kind is asked for; refused
  // only when it is known to be another kind.
  const kind = await cachedKind(path, ns.ino);
  if (kind !== undefined && kind !== 'net')
    return `CNI_NETNS "${shown}" is not a network namespace (it is the ${kind} namespace kind)`;
  // The host's own: no pod runs there, and a failed ADD's rollback DEL would delete a host
  // interface of the pod's interface name (a plugin refuses to ADD over an existing one, then DELs it).
  if (host !== undefined && isNamespace(ns, host))
    return `CNI_NETNS "${shown}" is the host's network namespace (stewardd's own)`;
  return undefined;
}

/** Whether `ns` is the namespace at `path` (one nsfs inode). */
function isNamespace(ns: Stats, path: string): boolean {
  try {
    const other = statSync(path);
    return ns.ino === other.ino && ns.dev === other.dev;
  } catch {
    return false;
  }
}

/**
 * Kinds already read, by path and namespace inode: an attachment's netns is checked at its ADD and
 * again at every teardown DEL, and reading a bind mount's kind reads all of mountinfo. A path and
 * inode name one live namespace; kept for at most KIND_CACHE_MAX of them, then started afresh.
 */
const kinds = new Map<string, string | undefined>();
const KIND_CACHE_MAX = 4096;

async function cachedKind(path: string, ino: number): Promise<string | undefined> {
  const key = `${ino} ${path}`;
  if (kinds.has(key)) return kinds.get(key);
  const kind = await namespaceKind(path);
  if (kinds.size >= KIND_CACHE_MAX) kinds.clear();
  kinds.set(key, kind);
  return kind;
}

const kindOf = (name: string) => /^([a-z_]+):\[\d+\]$/.exec(name)?.[1];

/**
 * "net", "uts", "pid", …: the kind of the namespace file at `path` (on nsfs), or undefined when it
 * cannot be told. A /proc/<pid>/ns/* file, reached directly or through symlinks (through
 * /proc/<pid>/root/ too), is a link to its kind and number ("uts:[4026531838]"); a bind mount of
 * one (/run/netns/x) is not, but its line in mountinfo has it as the mount's root: the mountinfo
 * of the mount namespace the path is in, another process's for a path through /proc/<pid>/root/.
 * mountinfo is read off the event loop: while a burst of sandboxes mounts and unmounts, the kernel's
 * mount lock held a synchronous read of it for 83 and 125 ms of stewardd's loop (a CPU profile of a
 * 100-pod burst), and a blocked loop answers STATUS late (issue 37).
 */
async function namespaceKind(path: string): Promise<string | undefined> {
  // Symlinks are followed one by one: the last one of a /proc/<pid>/ns/* file names its kind
  // (realpath cannot resolve that name, it is no path).
  let at = path;
  for (let hops = 0; hops < 40; hops++) {
    let target: string;
    try {
      target = readlinkSync(at);
    } catch {
      break; // not a link
    }
    const own = kindOf(target);
    if (own !== undefined) return own;
    at = resolve(dirname(at), target);
  }
  // `s`: a file name may hold a newline (mountinfo writes it \012), and it is still this path.
  const other = /^\/proc\/(\d+|self|thread-self)\/root(\/.*)$/s.exec(normalize(at));
  let mountinfo = '/proc/self/mountinfo';
  let inner: string;
  if (other) {
    mountinfo = `/proc/${other[1]}/mountinfo`;
    inner = other[2] as string;
  } else {
    try {
      inner = realpathSync(at);
    } catch {
      return undefined;
    }
  }
  let mounts: string;
  try {
    mounts = await readFile(mountinfo, 'utf8');
  } catch {
    return undefined;
  }
  // Fields: id parent major:minor root mountpoint …; octal escapes (\040) in paths.
  const unescape = (f: string) => f.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  let kind: string | undefined;
  for (const line of mounts.split('\n')) {
    const f = line.split(' ');
    if (f.length > 4 && unescape(f[4] as string) === inner) kind = kindOf(unescape(f[3] as string)) ?? kind;
  }
  return kind; // the last mount on a path is the one it shows
}

/**
 * Which namespace `path` names now, in a form that changes when the path comes to name another one:
 * its nsfs device and inode, and, since an inode number is reused once its namespace is gone, for
 * a /proc/<pid>/ns/* path the process's start time (a pid is reused too, and such an inode is made
 * anew at each look, its times with it), for any other path (a bind mount: /run/netns/x) the
 * inode's change time, set when the mount made it and kept while it lives. Undefined when it
 * cannot be read.
 */
export function netnsIdentity(path: string): string | undefined {
  let at = path;
  let pid: string | undefined;
  for (let hops = 0; hops < 40; hops++) {
    let target: string;
    try {
      target = readlinkSync(at);
    } catch {
      break;
    }
    if (kindOf(target) !== undefined) {
      pid = procPid(at);
      // Reached some other way (/proc/1/root/proc/<pid>/ns/net, a linked directory): by its inode
      // alone, whose times change at each look.
      if (pid === undefined) return nsInode(path)?.inode;
      break;
    }
    at = resolve(dirname(at), target);
  }
  const ns = nsInode(path);
  if (ns === undefined) return undefined;
  if (pid === undefined) return `${ns.inode} ctime ${ns.ctimeNs}`;
  const start = processStartTime(Number(pid));
  return start === undefined ? undefined : `${ns.inode} pid ${pid} start ${start}`;
}

/** The nsfs "device:inode" of `path` and the inode's change time, or undefined when it cannot be read. */
function nsInode(path: string): { inode: string; ctimeNs: bigint } | undefined {
  try {
    const st = statSync(path, { bigint: true });
    return { inode: `${st.dev}:${st.ino}`, ctimeNs: st.ctimeNs };
  } catch {
    return undefined;
  }
}

/** The pid of a /proc/<pid>/ns/* path (its directory resolved), or undefined when it is none. */
function procPid(at: string): string | undefined {
  const nsOf = /^\/proc\/(\d+|self|thread-self)\/(?:task\/\d+\/)?ns\/[a-z_]+$/;
  let own = nsOf.exec(normalize(at))?.[1];
  if (own === undefined) {
    try {
      own = nsOf.exec(`${realpathSync(dirname(at))}/${basename(at)}`)?.[1];
    } catch {
      return undefined;
    }
  }
  return own === 'self' || own === 'thread-self' ? String(process.pid) : own;
}

/**
 * The netns to give a DEL: `path` while it is still a network namespace other than the host's, and,
 * when the ADD recorded which one it was (`identity`, netnsIdentity), still that one; else empty
 * (which the spec allows on DEL). A stored path can come to name another namespace: a
 * /proc/<pid>/ns/net whose pid was reused (by a host process, whose interface of the pod's name a
 * bridge DEL would remove), or a bind mount made again under the same name for another pod, whose
 * interface it would remove.
 */
export async function teardownNetns(path: string, host?: string, identity?: string | null): Promise<string> {
  if (path === '' || (await netnsProblem(path, host)) !== undefined) return '';
  return identity == null || netnsIdentity(path) === identity ? path : '';
}
