// Which live attachment already holds an interface name in a pod's namespace. A plugin asked to make
// an interface that exists refuses, and the DEL of that ADD's rollback then removes the existing one
// (bridge: "container veth name provided (eth0) already exists", then its DEL deletes eth0 and
// host-local frees the address); a DEL passed through for an attachment steward never added removes
// it the same way. Neither reaches a delegate with a namespace where another attachment's interface
// of that name lives (found by a hostile review).

import type { Store } from '../store/store.js';
import type { Attachment, AttachmentKey } from '../store/types.js';

const otherKey = (a: AttachmentKey, key: AttachmentKey) =>
  a.containerId !== key.containerId || a.network !== key.network;

/**
 * Whether `a` holds `ifname` in the namespace at `netns` now: the same path and ifname, and, when
 * its ADD recorded which namespace the path named (`netnsId`), still that one (a path made again
 * for another pod is not its namespace).
 */
const holds = (a: Attachment, ifname: string, netns: string, identity: string | undefined) =>
  a.ifname === ifname && a.netns === netns && (a.netnsId == null || a.netnsId === identity);

/**
 * The container's own attachment on another network that holds the ADD's interface (the same
 * container, netns and ifname): looked up by container id, so an ADD reads no row per pod.
 */
export function ownInterfaceHolder(
  store: Store,
  key: AttachmentKey,
  netns: string,
  identity: string | undefined,
): Attachment | undefined {
  return store
    .listAttachments({ containerId: key.containerId, state: 'added', limit: 100 })
    .find((a) => otherKey(a, key) && holds(a, key.ifname, netns, identity));
}

/**
 * Any attachment of another key that holds the interface: every added one is read, so only a DEL
 * steward never saw asks (a pass-through, which runs its delegates' DELs anyway).
 */
export function anyInterfaceHolder(
  store: Store,
  key: AttachmentKey,
  netns: string,
  identity: string | undefined,
): Attachment | undefined {
  return store.attachmentsInState('added').find((a) => otherKey(a, key) && holds(a, key.ifname, netns, identity));
}
