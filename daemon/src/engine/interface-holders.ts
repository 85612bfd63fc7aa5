// Which live attachments already hold interface names in a pod's namespace. A plugin asked to make
// an interface that exists refuses, and the DEL of that ADD's rollback then removes the existing one
// (bridge: "container veth name provided (eth0) already exists", then its DEL deletes eth0 and
// host-local frees the address); a DEL passed through for an attachment steward never added removes
// it the same way. Neither reaches a delegate with a namespace where another attachment's interface
// of that delegate's name lives (found by a hostile review). An attachment holds one interface per
// delegate: its steps' ifnames (CNI_IFNAME or the delegate's own for the first, net1, net2, … or
// their own for the others).

import { clip, CniError, ErrorCode } from '@cni-steward/shared';
import type { Store } from '../store/store.js';
import type { Attachment, AttachmentKey } from '../store/types.js';
import { pluginStdin, type StewardConf } from './netconf.js';
import { netnsIdentity } from './netns.js';

/** Where the interfaces are looked for: the namespace `netns` names now, in this boot. */
export interface Namespace {
  netns: string;
  /** netnsIdentity(netns): a path made again for another pod is not the namespace an attachment recorded. */
  identity: string | undefined;
  bootId: string;
}

/** An attachment holding an interface, and the delegate whose interface it is (its IPAM's network name). */
export type Holder = Attachment & { delegateName: string };

/** The interfaces attachments of another key among `candidates` hold in `ns`, by name. */
function heldIn(store: Store, candidates: Attachment[], key: AttachmentKey, ns: Namespace): Map<string, Holder> {
  const held = new Map<string, Holder>();
  for (const a of candidates) {
    // Only the key itself is skipped: the same network added again at another CNI_IFNAME makes its
    // later delegates' net1, net2, … where the first attachment's already are.
    if (a.containerId === key.containerId && a.network === key.network && a.ifname === key.ifname) continue;
    if (a.bootId !== ns.bootId) continue;
    // One namespace however its path is spelled (/run/netns/x, /var/run/netns//x: a path compared as
    // text let a hostile probe's second spelling through); by the path where the attachment recorded
    // no identity.
    if (a.netnsId != null ? !sameNamespace(a.netns, a.netnsId, ns.identity) : a.netns !== ns.netns) continue;
    for (const s of store.stepsOf(a.id)) held.set(s.ifname, { ...a, delegateName: s.delegateName });
  }
  return held;
}

/**
 * Whether the namespace recorded as `recorded` (netnsIdentity of `path` then) is the one whose
 * identity is `now`: the same nsfs device and inode, and, when the two were reached by kinds of
 * path whose identities differ beyond that (a /proc/<pid>/ns/net and a bind mount of it), the
 * recorded one still alive under its own path, since an inode is reused once its namespace is gone.
 */
function sameNamespace(path: string, recorded: string, now: string | undefined): boolean {
  if (now === undefined) return false;
  if (recorded === now) return true;
  const inode = (identity: string) => identity.split(' ')[0];
  return inode(recorded) === inode(now) && netnsIdentity(path) === recorded;
}

/**
 * ADD: refused (102) where one of the container's other attachments holds an interface a delegate
 * of `conf` would make in `ns`, or holds state a delegate's plugin keeps by container and delegate
 * network (CONTAINER_KEYED). Looked up by container id, so an ADD reads no row per pod.
 */
export function refuseHeld(store: Store, key: AttachmentKey, ns: Namespace, conf: StewardConf): void {
  const own = store.listAttachments({ containerId: key.containerId, state: 'added', limit: 100 });
  const held = heldIn(store, own, key, ns);
  const clash = conf.delegates.find((d) => held.has(d.ifname));
  if (clash)
    throw new CniError(
      ErrorCode.AttachmentConflict,
      `container ${key.containerId} already has interface ${clash.ifname} in ${clip(ns.netns, 200)} on network ${held.get(clash.ifname)!.network}; give this network another CNI_IFNAME or other delegate ifnames, or DEL that one first`,
    );
  const keyed = keyedHeld(store, key, conf, own);
  for (const d of conf.delegates)
    for (const p of d.plugins) {
      const kind = CONTAINER_KEYED.get(p.type);
      const twin = keyed.get(`${d.name} ${p.type}`);
      if (!kind || !twin) continue;
      const mine = kind.holds(pluginStdin(d, p, conf.runtimeConfig));
      if (kind.eitherClashes ? twin.holds || mine : twin.holds && mine)
        throw new CniError(
          ErrorCode.AttachmentConflict,
          `container ${key.containerId} already has delegate network ${d.name} with ${p.type} (network ${twin.attachment.network}, interface ${twin.attachment.ifname}); ${p.type} keeps its ${kind.what} by container and network, not interface, so this attachment's DEL, or its failed ADD's rollback, would remove that one's: give this delegate another network name, or DEL that one first`,
        );
    }
}

/** An attachment holding a CONTAINER_KEYED plugin's step, and whether that step holds anything. */
export interface KeyedHolder {
  attachment: Attachment;
  holds: boolean;
}

/**
 * What CONTAINER_KEYED plugins the container's attachments of another key run, by "<delegate
 * network> <plugin type>" (their state's key): a pass-through DEL of the container skips those
 * that hold something. Nothing is read when `conf` runs none of them.
 */
export function keyedHeld(
  store: Store,
  key: AttachmentKey,
  conf: StewardConf,
  own?: Attachment[],
): Map<string, KeyedHolder> {
  const held = new Map<string, KeyedHolder>();
  if (!conf.delegates.some((d) => d.plugins.some((p) => CONTAINER_KEYED.has(p.type)))) return held;
  own ??= store.listAttachments({ containerId: key.containerId, state: 'added', limit: 100 });
  for (const a of own) {
    if (a.network === key.network && a.ifname === key.ifname) continue;
    for (const s of store.stepsOf(a.id)) {
      const kind = CONTAINER_KEYED.get(s.pluginType);
      const k = `${s.delegateName} ${s.pluginType}`;
      // One that holds is kept: another of the same key that does not must not hide it.
      if (kind && !held.get(k)?.holds) held.set(k, { attachment: a, holds: storedHolds(kind, s.config) });
    }
  }
  return held;
}

interface KeyedKind {
  /** What the plugin keeps under the container and network, for the refusal's message. */
  what: string;
  /** Whether a plugin stdin makes the plugin hold anything. */
  holds: (stdin: Record<string, unknown>) => boolean;
  /** Whether one attachment holding is enough to clash: its DEL acts whether or not its own stdin holds. */
  eitherClashes: boolean;
}

/**
 * Plugins that keep what they set up by container id and delegate network name, not interface. The
 * same network added to a container twice, at eth0 and then net1, made the second's bandwidth fail
 * "file exists", and its rollback removed eth0's port mappings and shaping (a hostile probe, 3 Dec).
 * portmap makes its chains (CNI-DN-<hash of both>) only for port mappings, and its DEL without them
 * does nothing; bandwidth makes its ifb device for a rate, and its DEL removes that device whatever
 * it is given. A delegate network added twice without either (Multus's `networks: a, a`) is let be.
 */
const CONTAINER_KEYED: ReadonlyMap<string, KeyedKind> = new Map([
  [
    'portmap',
    {
      what: 'port-mapping chains',
      holds: (stdin) => nonEmptyArray(record(stdin.runtimeConfig).portMappings),
      eitherClashes: false,
    },
  ],
  [
    'bandwidth',
    {
      what: 'shaping (its ifb device)',
      holds: (stdin) => {
        const rc = record(record(stdin.runtimeConfig).bandwidth);
        return [stdin.ingressRate, stdin.egressRate, rc.ingressRate, rc.egressRate].some(
          (r) => typeof r === 'number' && r > 0,
        );
      },
      eitherClashes: true,
    },
  ],
]);

const record = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {};
const nonEmptyArray = (v: unknown) => Array.isArray(v) && v.length > 0;

/** Whether a step's stored plugin stdin holds anything of `kind`'s; one that does not parse does, to be safe. */
function storedHolds(kind: KeyedKind, config: string): boolean {
  let stdin: unknown;
  try {
    stdin = JSON.parse(config);
  } catch {
    return true;
  }
  return kind.holds(record(stdin));
}

/**
 * The interfaces any attachment of another key holds in `ns`: every added one is read, so only a
 * DEL steward never saw asks (a pass-through, which runs its delegates' DELs anyway).
 */
export function anyHeldInterfaces(store: Store, key: AttachmentKey, ns: Namespace): Map<string, Holder> {
  return heldIn(store, store.attachmentsInState('added'), key, ns);
}
