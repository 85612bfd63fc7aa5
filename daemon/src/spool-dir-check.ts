// Whether a spool dir can be drained, and trusted. A spooled DEL names the delegate plugins
// stewardd runs as root and the container whose networking it tears down, so a dir anyone but root
// (or the daemon's own user) can write to is not drained: a local user could put a DEL there that
// runs a binary of theirs or releases a live pod's address. The shim makes its dirs 0700; a dir
// someone made first (a spool dir under /tmp) or opened up is refused, as are its ancestors when a
// user other than root could replace them. Writable by a group is trusted only for root's group and
// the daemon's own (a user's private group, where `npm start` runs under umask 002).

import { lstatSync, mkdirSync, opendirSync, realpathSync, statSync, type BigIntStats, type Stats } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** Why `dir` cannot be drained, or undefined when it can (or does not exist yet: the shim makes it). */
export function spoolDirProblem(dir: string): string | undefined {
  let isDir: boolean;
  try {
    isDir = statSync(dir).isDirectory();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return `it cannot be read: ${(e as Error).message}`;
    try {
      lstatSync(dir);
    } catch {
      return undefined;
    }
    return 'it is a symbolic link to a path that does not exist';
  }
  if (!isDir) return 'it is not a directory';
  try {
    opendirSync(dir).closeSync();
  } catch (e) {
    return `it cannot be listed: ${(e as Error).message}`;
  }
  return untrusted(dir);
}

/**
 * Why `dir` must not be a spool dir because it is the state dir or the CNI conf dir,
 * or undefined. A drain takes every `*.json` in a spool dir for a spooled DEL and moves what is not
 * one aside: given the state dir it moved install.json away, and uninstall then found nothing recorded
 * and left the conflist dangling (hostile run, 1 Dec); given the conf dir it would move the node's
 * `.json` network configs. Compared as resolved, so a link to either is refused too.
 */
export function sharedDirProblem(dir: string, stateDir: string, confDir: string | undefined): string | undefined {
  const real = (p: string) => {
    try {
      return realpathSync(p);
    } catch {
      return resolve(p);
    }
  };
  const at = real(dir);
  for (const [what, path] of [
    ['the state dir', stateDir],
    ['the CNI conf dir', confDir],
  ] as const)
    if (path !== undefined && at === real(path))
      return `it is ${what} ${path}, whose own *.json files a drain would take for spooled DELs and move aside`;
  return undefined;
}

/** `--spool-dir`'s problem for `run` and `install` (none, or one). */
export function spoolDirFlagProblems(spoolDir: string, stateDir: string, confDir: string | undefined): string[] {
  const shared = sharedDirProblem(spoolDir, stateDir, confDir);
  return shared === undefined ? [] : [`--spool-dir ${spoolDir} cannot be a spool dir: ${shared}`];
}

/** The user a dir may belong to besides root: the daemon's own (a daemon not run as root: `npm start`). */
const ownUid = (): number => process.geteuid?.() ?? 0;
const ownGid = (): number => process.getegid?.() ?? 0;

const mode = (st: Stats) => `mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')}`;

/**
 * Why `dir` (a directory that exists) is not root's alone, or undefined. The dir itself and each
 * ancestor, on the path as named and as resolved: owned by root or the daemon's user, writable by
 * group only for root's group or the daemon's; the dir not writable by others, an ancestor only with
 * the sticky bit (/tmp: no one else can rename what is in it).
 */
export function untrusted(dir: string): string | undefined {
  let real: string;
  try {
    real = realpathSync(dir);
  } catch (e) {
    return `it cannot be resolved: ${(e as Error).message}`;
  }
  let st: Stats;
  try {
    st = statSync(real);
  } catch (e) {
    return `it cannot be read: ${(e as Error).message}`;
  }
  const why = unsafe(st, false);
  if (why !== undefined) return `it ${why}: a DEL spooled there names the plugins stewardd runs as root`;
  const link = linkOwner(resolve(dir));
  if (link !== undefined) return `it is a symbolic link that ${link}, who could point it elsewhere`;
  for (const path of new Set([...ancestors(resolve(dir)), ...ancestors(real)])) {
    let a: Stats;
    try {
      a = lstatSync(path);
    } catch (e) {
      return `its parent ${path} cannot be read: ${(e as Error).message}`;
    }
    // A link's target is checked on the resolved path; the link itself must be root's (or ours).
    const bad = a.isSymbolicLink() ? linkOwner(path) : unsafe(a, true);
    if (bad !== undefined) return `its parent ${path} ${bad}: it could be replaced`;
  }
  return undefined;
}

/** Why the symbolic link at `path` is not root's (or the daemon's user's); undefined when it is, or is no link. */
function linkOwner(path: string): string | undefined {
  try {
    const st = lstatSync(path);
    if (!st.isSymbolicLink() || st.uid === 0 || st.uid === ownUid()) return undefined;
    return `belongs to uid ${st.uid}`;
  } catch {
    return undefined;
  }
}

/** Why a user other than root and the daemon's could write to this dir, or undefined. */
function unsafe(st: Stats, ancestor: boolean): string | undefined {
  const uid = ownUid();
  const gid = ownGid();
  if (st.uid !== 0 && st.uid !== uid) return `belongs to uid ${st.uid}`;
  if ((st.mode & 0o020) !== 0 && st.gid !== 0 && st.gid !== gid) return `is writable by group ${st.gid} (${mode(st)})`;
  if ((st.mode & 0o002) !== 0 && !(ancestor && (st.mode & 0o1000) !== 0))
    return `is writable by others (${mode(st)})${ancestor ? ' without the sticky bit' : ''}`;
  return undefined;
}

/** `/a/b/c` → `/a/b`, `/a`, `/`. */
function ancestors(path: string): string[] {
  const out: string[] = [];
  for (let p = dirname(path); ; p = dirname(p)) {
    out.push(p);
    if (p === dirname(p)) return out;
  }
}

/** Makes a spool dir that is not there yet, 0700 as the shim makes it; one that cannot be made is told by the check. */
export function makeMissing(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch {
    /* spoolDirProblem says why it cannot be drained */
  }
}

/** A dir's stat (following links; bigint: an inode past 2^53, overlayfs xino, stays exact), or undefined when it is not there. */
export function statDir(dir: string): BigIntStats | undefined {
  try {
    return statSync(dir, { bigint: true });
  } catch {
    return undefined;
  }
}

/** What a dir is: device, inode, mode, owner; undefined when it is not there. */
function dirIdentity(st: BigIntStats | undefined): string | undefined {
  return st && `${st.dev}:${st.ino}:${st.mode}:${st.uid}:${st.gid}`;
}

/**
 * Dirs as they passed the check. Asked as each pass or request starts: the same dir (one stat) is
 * still good, another one (replaced, its mode or owner changed) is checked again in full; its
 * parents and links are checked again by the next round (within a second). A full
 * check on every ADD and CHECK cost a dozen syscalls each, and RSS grew with them under load.
 */
export class CheckedDirs {
  private readonly seen = new Map<string, string | undefined>();

  passed(dir: string): void {
    this.seen.set(dir, dirIdentity(statDir(dir)));
  }

  /** `st`: the dir's stat taken by the caller, which lists it next with the same one (statDir). */
  stillGood(dir: string, st: BigIntStats | undefined = statDir(dir)): boolean {
    const now = dirIdentity(st);
    if (now !== undefined && now === this.seen.get(dir)) return true;
    if (spoolDirProblem(dir) !== undefined) return false;
    this.seen.set(dir, now);
    return true;
  }
}
