// The options of the node-lifecycle commands (install, uninstall, the SIGTERM decision). Owned
// here, next to the code that uses them; command-line.ts parses the command line into them.

import type { CniVersionMode } from './cni-version.js';

/** What SIGTERM does to the node's install: auto asks the API server whether the DaemonSet is gone. */
export type UninstallMode = 'auto' | 'always' | 'never';

/** Which C library the node's shim binary is linked against (a container cannot see the host's). */
export type ShimLibc = 'glibc' | 'musl';

export interface InstallConfig {
  cniBinDir: string;
  cniConfDir: string;
  stateDir: string;
  shim: string;
  shimLibc: ShimLibc;
  socket: string;
  spoolDir: string;
  force: boolean;
  logLevel: string;
  /** --cni-version: steward's own conflist version, or how to choose it (cni-version.ts). */
  cniVersion: CniVersionMode;
  /** --runtime-endpoint: the CRI socket `auto` asks; undefined = the usual containerd then CRI-O sockets. */
  runtimeEndpoint: string | undefined;
  /** --restart-grace: recorded for `stewardd run` (its own flag wins); undefined: not recorded. */
  restartGraceS?: number;
}

export interface UninstallConfig {
  cniBinDir: string | undefined;
  cniConfDir: string | undefined;
  stateDir: string;
  dbPath: string;
  socket: string | undefined;
  drainTimeoutMs: number;
  purge: boolean;
  logLevel: string;
}
