// What keeps a finding of a sandbox the runtime does not list from being taken for dead, read again
// as a pass goes: ADDs the journal saw begin, network namespaces that still exist, and what still
// owes a teardown.

import { existsSync } from 'node:fs';
import type { Attachment } from '../store/types.js';
import type { Finding } from './decide.js';
import type { AuditDeps } from './types.js';

/**
 * What keeps a sandbox the runtime does not list from being taken for dead: an ADD the journal saw
 * begin after its first read, and a network namespace that still exists (containerd lists a sandbox
 * only once its network is set up, its container created and its task started; the namespace exists
 * from before the ADD until StopPodSandbox has torn the network down). Namespaces come from the
 * journal's attachments and from libcni cache entries that record one.
 */
export function sandboxGuard(deps: AuditDeps, known: ReadonlySet<string>, findings: readonly Finding[]) {
  const netnsOf = new Map<string, Set<string>>();
  const note = (id: string, netns: string | undefined) => {
    if (netns === undefined || netns === '') return;
    let set = netnsOf.get(id);
    if (set === undefined) netnsOf.set(id, (set = new Set()));
    set.add(netns);
  };
  let journalled: Attachment[] = [];
  const read = () => {
    journalled = liveAttachments(deps.journal);
    for (const a of journalled) note(a.containerId, a.netns);
    return journalled;
  };
  for (const f of findings) note(f.containerId, f.netns);
  const hasNetns = (id: string) => [...(netnsOf.get(id) ?? [])].some((p) => existsSync(p));
  const starting = (a: Attachment) => a.state === 'adding' || !known.has(a.containerId);
  return {
    /**
     * Containers in flight now, or journalled since the pass's first read: a fresh read of the
     * journal (after the scans, then once per batch of releases).
     */
    startingNow: (): Set<string> =>
      new Set(
        read()
          .filter(starting)
          .map((a) => a.containerId),
      ),
    netnsPresent: (): Set<string> => new Set([...netnsOf.keys()].filter(hasNetns)),
    /** Pods steward set up (added) whose namespace is still there, as of the last journal read. */
    withNetns: (): string[] =>
      journalled.filter((a) => a.state === 'added' && a.netns !== '' && existsSync(a.netns)).map((a) => a.containerId),
    hasNetns,
  };
}

/** The journal's attachments that are not torn down: in flight, added, or still owing DELs. */
export function liveAttachments(journal: AuditDeps['journal']): Attachment[] {
  return [
    ...journal.attachmentsInState('adding'),
    ...journal.attachmentsInState('added'),
    ...journal.attachmentsInState('deleting'),
  ];
}

/** Ids of the attachments that owe a teardown now (added, or with steps still deleting), read afresh. */
export function owingTeardown(journal: AuditDeps['journal']): Set<number> {
  return new Set([...journal.attachmentsInState('added'), ...journal.attachmentsInState('deleting')].map((a) => a.id));
}

export type SandboxGuard = ReturnType<typeof sandboxGuard>;
