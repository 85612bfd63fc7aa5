// Which live attachments already hold interface names in a pod's namespace. A plugin asked to make
// an interface that exists refuses, and the DEL of that ADD's rollback then removes the existing one
// (bridge: "container veth name provided (eth0) already exists", then its DEL deletes eth0 and
// host-local frees the address); a DEL passed through for an attachment steward never added removes
// it the same way. Neither reaches a delegate with a namespace where another attachment's interface
// of that delegate's name lives (found by a hostile review). An attachment holds one interface per
// delegate: its steps' ifnames (CNI_IFNAME or the delegate's own for the first, net1, net2, … or
// their own for the others).

import type { Store } from '../store/store.js';
import type { Attachment, AttachmentKey } from '../store/types.js';

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
    // One namespace by its identity, however the path is spelled (/run/netns/x, /var/run/netns//x: a
    // path compared as text let a hostile probe's second spelling through); by the path where the
    // attachment recorded none.
    if (a.netnsId != null ? a.netnsId !== ns.identity : a.netns !== ns.netns) continue;
    for (const s of store.stepsOf(a.id)) held.set(s.ifname, { ...a, delegateName: s.delegateName });
  }
  return held;
}

/**
 * The interfaces the container's own attachments on other networks hold in `ns`: looked up by
 * container id, so an ADD reads no row per pod.
 */
export function ownHeldInterfaces(store: Store, key: AttachmentKey, ns: Namespace): Map<string, Holder> {
  return heldIn(store, store.listAttachments({ containerId: key.containerId, state: 'added', limit: 100 }), key, ns);
}

/**
 * The interfaces any attachment of another key holds in `ns`: every added one is read, so only a
 * DEL steward never saw asks (a pass-through, which runs its delegates' DELs anyway).
 */
export function anyHeldInterfaces(store: Store, key: AttachmentKey, ns: Namespace): Map<string, Holder> {
  return heldIn(store, store.attachmentsInState('added'), key, ns);
}
