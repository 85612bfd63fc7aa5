// Delegates in the node's mount namespace (`stewardd run --plugin-mount-ns`). In a DaemonSet pod
// stewardd sees only the host paths its pod mounts, and a plugin it starts saw only those too:
// flannel's /run/flannel/subnet.env, cilium's agent socket, a host-local `dataDir` elsewhere than
// /var/lib/cni, the host's iptables backend and libraries were the image's or nothing (hostile
// review, 30 Nov). With the flag, the spawner starts each plugin through nsenter into the named
// mount namespace (the host's: /proc/1/ns/mnt under hostPID), where the plugin, its CNI_PATH and
// CNI_NETNS paths are the node's own. stewardd hands the path to its spawner in the environment.

import { existsSync, readlinkSync } from 'node:fs';
import { isAbsolute } from 'node:path';

/** The variable stewardd sets for its spawner (plugins/spawner-child.ts); not a setting of its own. */
export const PLUGIN_MOUNT_NS_ENV = 'STEWARD_PLUGIN_MOUNT_NS';

/** util-linux's nsenter: enters the namespace, then execs the plugin in the same process (same pid). */
export const NSENTER = '/usr/bin/nsenter';

/** The job's command line run in the mount namespace `ns`: nsenter, then the plugin. */
export function inMountNs<J extends { file: string; args?: string[] }>(job: J, ns: string | undefined): J {
  if (ns === undefined || ns === '') return job;
  return { ...job, file: NSENTER, args: [`--mount=${ns}`, '--', job.file, ...(job.args ?? [])] };
}

/** --plugin-mount-ns's value as a flag: an absolute path (what it names is checked at start, mountNsProblem). */
export function pluginMountNs(raw: string | undefined, problems: string[]): string | undefined {
  if (raw !== undefined && !isAbsolute(raw))
    problems.push(`--plugin-mount-ns must be an absolute path, such as /proc/1/ns/mnt, got "${raw}"`);
  return raw;
}

/** Why plugins cannot be started in mount namespace `ns`: not one, or no nsenter to enter it. */
export function mountNsProblem(ns: string): string | undefined {
  let link: string;
  try {
    link = readlinkSync(ns);
  } catch (e) {
    link = (e as Error).message;
  }
  if (!/^mnt:\[\d+\]$/.test(link))
    return `--plugin-mount-ns must name a mount namespace, such as /proc/1/ns/mnt (the host's, with hostPID): ${ns} is ${link}`;
  if (!existsSync(NSENTER)) return `--plugin-mount-ns needs ${NSENTER} (util-linux) to enter ${ns}`;
  return undefined;
}

/** Whether `ns` is this process's own mount namespace (no hostPID: /proc/1 is the pod's own init). */
export function isOwnMountNs(ns: string): boolean {
  try {
    return readlinkSync(ns) === readlinkSync('/proc/self/ns/mnt');
  } catch {
    return false;
  }
}
