// Debian's portmap plugin run directly for a container, the way libcni runs it in a chain after the
// plugin that gave the container its address: a real CNI-DN-* chain whose jump rules' comment names
// the network and container id (`dnat name: "NET" id: "ID"`), and the DEL that removes it. For tests
// of what is left in the nat table when a sandbox is gone (the audit's portmap findings).

import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { SYSTEM_CNI_BIN, sh } from './env.js';

/** portmap ADD or DEL for `cid` on `network`: host port `hostPort` to `ip`:80 (ADD's prevResult names the netns). */
export function portmapCall(
  command: 'ADD' | 'DEL',
  opts: { network: string; cid: string; netns: string; ip: string; hostPort: number },
): void {
  const conf = {
    cniVersion: '0.4.0',
    name: opts.network,
    type: 'portmap',
    capabilities: { portMappings: true },
    runtimeConfig: { portMappings: [{ hostPort: opts.hostPort, containerPort: 80, protocol: 'tcp' }] },
    ...(command === 'ADD'
      ? {
          prevResult: {
            cniVersion: '0.4.0',
            interfaces: [{ name: 'eth0', sandbox: opts.netns }],
            ips: [{ version: '4', address: `${opts.ip}/24`, interface: 0 }],
          },
        }
      : {}),
  };
  const r = spawnSync(join(SYSTEM_CNI_BIN, 'portmap'), [], {
    input: JSON.stringify(conf),
    encoding: 'utf8',
    env: {
      CNI_COMMAND: command,
      CNI_CONTAINERID: opts.cid,
      CNI_NETNS: opts.netns,
      CNI_IFNAME: 'eth0',
      CNI_PATH: SYSTEM_CNI_BIN,
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    },
  });
  if (r.status !== 0) throw new Error(`portmap ${command} exited ${r.status}: ${r.stdout}${r.stderr}`);
}

/** Container ids with a portmap chain of `network` in the nat table (from the jump rules' comments). */
export function portmapOwners(network: string): string[] {
  const owners = new Set<string>();
  for (const m of sh('iptables-save', ['-t', 'nat']).matchAll(/dnat name: \\"([^"\\]*)\\" id: \\"([0-9a-f]+)\\"/g))
    if (m[1] === network) owners.add(m[2]!);
  return [...owners].sort();
}
