// The journal's attachment row from a CNI request: one builder for ADD and for DEL's tombstone, so a
// column added to the row is filled by both.

import type { CniEnv, podFromCniArgs } from '@cni-steward/shared';
import type { AttachmentKey, NewAttachment } from '../store/types.js';

export function attachmentRow(
  bootId: string,
  env: CniEnv,
  key: AttachmentKey,
  cniVersion: string,
  configText: string,
  pod: ReturnType<typeof podFromCniArgs>,
  netnsId: string | null = null,
): NewAttachment {
  return {
    ...key,
    netns: env.netns,
    netnsId,
    cniArgs: env.args,
    cniPath: env.path,
    cniVersion,
    bootId,
    config: configText,
    podNamespace: pod.namespace,
    podName: pod.name,
    podUid: pod.uid,
  };
}
