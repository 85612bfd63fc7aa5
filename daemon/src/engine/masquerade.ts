// bridge's and ptp's masquerade chain, removed by steward when their own DEL could not. For an
// `ipMasq: true` network both plugins (Debian's containernetworking-plugins 1.1.1) give a pod a nat
// chain CNI-<24 hex of sha512(network name + container id)> (ACCEPT, MASQUERADE) and one POSTROUTING
// rule per pod address that jumps to it. Their DEL finds those rules from the addresses on the pod's
// interface, read inside its netns: given no CNI_NETNS, or a netns whose interface an earlier DEL
// attempt already removed (it failed after that, in IPAM say), they free the address and leave the
// chain (docs/teardown.md). So after such a DEL succeeds the chain and every POSTROUTING jump to it
// are removed here, in both families, with the host's iptables (the binary the plugins use, found on
// their PATH by the executor's runTool).

import { createHash } from 'node:crypto';
import { ToolMissing, type ToolRunner } from '../plugins/executor.js';
import type { Store } from '../store/store.js';

/** Removes a network's chain for a container; resolves with how many rules and chains went. */
export type MasqueradeRelease = (network: string, containerId: string) => Promise<number>;

const MASQUERADING = new Set(['bridge', 'ptp']);

/**
 * The plugin's DEL on an ipMasq network ran without a netns, or again after a DEL of it failed (the
 * interface it reads its rules from may have gone with that one): it left its chain, if it made one.
 * A first DEL with the netns finds its own rules, so it costs no iptables run.
 */
export function leavesMasquerade(config: Record<string, unknown>, netns: string, retried = false): boolean {
  return (netns === '' || retried) && MASQUERADING.has(String(config.type)) && config.ipMasq === true;
}

/**
 * How long an iptables run waits for the xtables lock (iptables-legacy's; nf_tables takes none): a
 * holder that does not let go fails the removal (the step is retried) rather than holding a plugin slot
 * up to the plugin timeout.
 */
export const XTABLES_WAIT_S = 5;

/** The chain the plugins name for a network and container (their FormatChainName). */
export function masqueradeChain(network: string, containerId: string): string {
  return `CNI-${createHash('sha512')
    .update(network + containerId)
    .digest('hex')
    .slice(0, 24)}`;
}

/** An `iptables -S` line's words, a double-quoted one unquoted (iptables escapes `"` and `\` in it). */
export function ruleWords(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string;
    if (quoted) {
      if (c === '\\' && i + 1 < line.length) word += line[++i];
      else if (c === '"') quoted = false;
      else word += c;
    } else if (c === '"') {
      quoted = inWord = true;
    } else if (c === ' ' || c === '\t') {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  return words;
}

/** The POSTROUTING rules of `iptables -S POSTROUTING` that jump to `chain`, each as its words after `-A POSTROUTING`. */
export function jumpsTo(listing: string, chain: string): string[][] {
  const out: string[][] = [];
  for (const line of listing.split('\n')) {
    const words = ruleWords(line.trim());
    if (words[0] !== '-A' || words[1] !== 'POSTROUTING') continue;
    const target = words.indexOf('-j');
    if (target > 1 && words[target + 1] === chain) out.push(words.slice(2));
  }
  return out;
}

/** What iptables (legacy or nf_tables) says of a chain that is not there. */
const NO_CHAIN = /No chain\/target\/match by that name|does not exist/;
/** What it says when the family has no nat table (IPv6 off): the plugin could make no chain there either. */
const NO_TABLE = /can't initialize|table\b.*\bdoes not exist/i;

/**
 * Removes the chain and the POSTROUTING jumps to it, IPv4 then IPv6. A family whose tool is not
 * installed, or has no nat table, held none (the plugin's ADD needs them); a chain that is not
 * there is nothing to do. Any other failure rejects (the teardown step fails and is retried).
 */
export async function releaseMasquerade(run: ToolRunner, network: string, containerId: string): Promise<number> {
  const chain = masqueradeChain(network, containerId);
  let removed = 0;
  for (const tool of ['iptables', 'ip6tables']) {
    const nat = (...args: string[]) => run(tool, ['-w', String(XTABLES_WAIT_S), '-t', 'nat', ...args]);
    let listing: string;
    try {
      listing = await nat('-S', 'POSTROUTING');
    } catch (e) {
      if (e instanceof ToolMissing || NO_TABLE.test((e as Error).message)) continue;
      throw e;
    }
    for (const rule of jumpsTo(listing, chain)) {
      await nat('-D', 'POSTROUTING', ...rule);
      removed++;
    }
    try {
      await nat('-F', chain);
    } catch (e) {
      if (NO_CHAIN.test((e as Error).message)) continue;
      throw e;
    }
    await nat('-X', chain);
    removed++;
  }
  return removed;
}

/**
 * Whether another attachment of the container, added or being added, has a delegate of this
 * network name: the chain is named by network and container alone, so it is that one's too.
 */
export function chainShared(store: Store, containerId: string, network: string, exceptAttachment?: number): boolean {
  // By state: a container's torn-down attachments (a pod restarted a thousand times) are never read.
  for (const state of ['added', 'adding'] as const)
    for (const a of store.listAttachments({ containerId, state, limit: 1000 })) {
      if (a.id === exceptAttachment) continue;
      for (const s of store.stepsOf(a.id)) if (configName(s.config) === network) return true;
    }
  return false;
}

function configName(config: string): string | undefined {
  try {
    const name = (JSON.parse(config) as { name?: unknown }).name;
    return typeof name === 'string' ? name : undefined;
  } catch {
    return undefined;
  }
}
