// CNI wire types. Versions 0.3.0 through 1.1.0 share one result shape; the differences are
// handled in convert.ts (0.3.x/0.4.0 IPs carry `version`, 1.1.0 interfaces add mtu/socketPath/pciID).

export interface CniInterface {
  name: string;
  mac?: string;
  sandbox?: string;
  mtu?: number;
  socketPath?: string;
  pciID?: string;
  [extra: string]: unknown;
}

export interface CniIpConfig {
  /** Present in 0.3.x/0.4.0 results only ("4" | "6"). */
  version?: '4' | '6';
  interface?: number;
  address: string;
  gateway?: string;
}

export interface CniRoute {
  dst: string;
  gw?: string;
  [extra: string]: unknown;
}

export interface CniDns {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

export interface CniResult {
  cniVersion: string;
  interfaces?: CniInterface[];
  ips?: CniIpConfig[];
  routes?: CniRoute[];
  dns?: CniDns;
  [extra: string]: unknown;
}

/** One plugin's configuration inside a network (a conflist entry, or a single .conf). */
export interface PluginConf {
  type: string;
  name?: string;
  cniVersion?: string;
  capabilities?: Record<string, boolean>;
  runtimeConfig?: Record<string, unknown>;
  prevResult?: CniResult;
  [key: string]: unknown;
}

/** A network configuration list (conflist). */
export interface NetConfList {
  cniVersion: string;
  name: string;
  disableCheck?: boolean;
  disableGC?: boolean;
  plugins: PluginConf[];
  [key: string]: unknown;
}

/** The CNI_* variables of one invocation. */
export interface CniEnv {
  command: CniCommand;
  containerId: string;
  netns: string;
  ifname: string;
  args: string;
  path: string;
}

export const CNI_COMMANDS = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION'] as const;
export type CniCommand = (typeof CNI_COMMANDS)[number];
