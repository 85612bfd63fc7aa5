// Addresses as the audit compares them: one canonical form, read from the kernel's text files
// (/proc/net/fib_trie, /proc/net/if_inet6) and from CNI results.

import { isIPv4, isIPv6 } from 'node:net';

/** An address in one comparable form: IPv4 dotted, IPv6 as 8 full lower-case groups; null if not one. */
export function canonicalIp(raw: string): string | null {
  const ip = raw.trim().split('/')[0] ?? '';
  if (isIPv4(ip)) return ip.split('.').map(Number).join('.');
  if (!isIPv6(ip)) return null;
  let text = ip.toLowerCase();
  // An IPv4 tail (::ffff:10.0.0.1) as two groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1] !== undefined) {
    const [a = 0, b = 0, c = 0, d = 0] = v4[1].split('.').map(Number);
    text = `${text.slice(0, -v4[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return groups.map((g) => g.padStart(4, '0')).join(':');
}

/** The local addresses of one /proc/net/fib_trie: the entries marked `/32 host LOCAL`. */
export function parseFibTrieLocal(text: string): string[] {
  const out = new Set<string>();
  let last: string | undefined;
  for (const line of text.split('\n')) {
    const leaf = /\|-- (\d+\.\d+\.\d+\.\d+)\s*$/.exec(line);
    if (leaf?.[1] !== undefined) last = leaf[1];
    else if (last !== undefined && /^\s*\/32 host LOCAL\s*$/.test(line)) out.add(last);
  }
  return [...out];
}

/** The addresses of one /proc/net/if_inet6: each line starts with the address as 32 hex digits. */
export function parseIfInet6(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]{32})\s/i.exec(line);
    if (m?.[1] === undefined) continue;
    out.push((m[1].toLowerCase().match(/.{4}/g) ?? []).join(':'));
  }
  return out;
}

/** Both files' addresses, from their contents read one after the other (as `cat` prints them). */
export function parseNetFiles(text: string): string[] {
  return [...parseFibTrieLocal(text), ...parseIfInet6(text)]
    .map((a) => canonicalIp(a))
    .filter((a): a is string => a !== null);
}

/** The addresses a CNI result names (`ips[].address` from 0.3.0 on, `ip4`/`ip6` before), canonical. */
export function resultAddresses(result: unknown): string[] {
  if (typeof result !== 'object' || result === null) return [];
  const r = result as { ips?: unknown; ip4?: { ip?: unknown }; ip6?: { ip?: unknown } };
  const raw: unknown[] = [];
  if (Array.isArray(r.ips)) for (const ip of r.ips) raw.push((ip as { address?: unknown } | null)?.address);
  raw.push(r.ip4?.ip, r.ip6?.ip);
  return raw
    .filter((a): a is string => typeof a === 'string')
    .map((a) => canonicalIp(a))
    .filter((a): a is string => a !== null);
}

/** resultAddresses of a result stored as JSON text (an attachment's); none when it is not JSON. */
export function storedResultAddresses(text: string | null): string[] {
  if (text === null) return [];
  try {
    return resultAddresses(JSON.parse(text));
  } catch {
    return [];
  }
}
