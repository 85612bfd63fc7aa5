// One builder of a plugin call (executor.ts PluginCall): the engine's ADD, CHECK, DEL, GC and STATUS
// and the audit's releases all name a command, a plugin and its stdin, and take the CNI_* of a
// request (or none: GC and STATUS are about no container; an audit release has no netns left).

import type { PluginCall } from './executor.js';

/** The CNI_* a call runs under; what is absent is empty, as the spec has it for that command. */
export interface CallTarget {
  containerId?: string;
  netns?: string;
  ifname?: string;
  args?: string;
  /** The request's CNI_PATH, searched after the daemon's bin dirs. */
  cniPath?: string;
}

export function pluginCall(
  command: PluginCall['command'],
  type: string,
  stdin: Record<string, unknown>,
  target: CallTarget = {},
  extra: Pick<PluginCall, 'onStart' | 'budgetMs'> = {},
): PluginCall {
  return {
    command,
    type,
    containerId: target.containerId ?? '',
    netns: target.netns ?? '',
    ifname: target.ifname ?? '',
    args: target.args ?? '',
    cniPath: target.cniPath ?? '',
    stdin,
    ...(extra.onStart !== undefined ? { onStart: extra.onStart } : {}),
    ...(extra.budgetMs !== undefined ? { budgetMs: extra.budgetMs } : {}),
  };
}

/** The target of a runtime's request (its CNI_* as parsed) on one interface. */
export function requestTarget(
  env: { containerId: string; netns: string; args: string; path: string },
  ifname: string,
): CallTarget {
  return { containerId: env.containerId, netns: env.netns, ifname, args: env.args, cniPath: env.path };
}
