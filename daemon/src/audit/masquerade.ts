// bridge's and ptp's masquerade chains as findings. For an `ipMasq: true` network both plugins
// (Debian's containernetworking-plugins 1.1.1) give a pod a nat chain CNI-<hash of network and
// container id> and jump to it from POSTROUTING (`-s <pod IP>`), each rule commented
// `name: "<network>" id: "<container id>"`. stewardd removes the chain when their DEL could not
// (engine/masquerade.ts); what was left before that, or by a DEL that never reached stewardd, is
// found here. A rule is theirs only when its chain is exactly the one its comment's network and id
// name (another chain with such a comment is somebody else's). One finding per (family, chain).
// The rules are read from the `iptables-save -t nat` (and ip6tables-save) output the portmap scan reads.

import { masqueradeChain, ruleWords } from '../engine/masquerade.js';
import { canonicalIp } from './addresses.js';
import type { Family, NatRule } from './nat-rules.js';

/** A masquerade chain and its owner; its addresses are the sources its POSTROUTING jumps match (`-s`). */
export type MasqueradeRule = NatRule;

const OWNER = /^name: "([^"\\]*)" id: "([^"\\]*)"$/;

/** The masquerade chains of one `iptables-save -t nat` output, with their owners and addresses. */
export function parseMasqueradeRules(family: Family, save: string): MasqueradeRule[] {
  const found = new Map<string, MasqueradeRule>();
  for (const line of save.split('\n')) {
    if (!line.startsWith('-A ')) continue;
    const words = ruleWords(line);
    const owner = OWNER.exec(valueOf(words, '--comment') ?? '');
    if (owner === null) continue;
    const [, network = '', containerId = ''] = owner;
    if (containerId === '') continue;
    const chain = masqueradeChain(network, containerId);
    const inPostrouting = words[1] === 'POSTROUTING' && valueOf(words, '-j') === chain;
    if (words[1] !== chain && !inPostrouting) continue;
    let rule = found.get(chain);
    if (rule === undefined) found.set(chain, (rule = { family, network, containerId, chain, addresses: [] }));
    const source = inPostrouting ? canonicalIp((valueOf(words, '-s') ?? '').replace(/\/\d+$/, '')) : null;
    if (source !== null && !rule.addresses.includes(source)) rule.addresses.push(source);
  }
  return [...found.values()];
}

/** The word after `flag` in a rule's words. */
function valueOf(words: readonly string[], flag: string): string | undefined {
  const i = words.indexOf(flag);
  return i < 0 ? undefined : words[i + 1];
}
