// Row mapping for the journal's two tables: the column lists every SELECT and RETURNING uses, and the
// conversion of a better-sqlite3 row (snake_case columns) into the typed Attachment and Step.

import type { Attachment, AttachmentState, Step, StepState } from './types.js';

export type Row = Record<string, unknown>;

export const ATTACHMENT_COLUMNS = `id, container_id, network, ifname, netns, netns_id, cni_args, cni_path, cni_version,
  boot_id, state, config, result, error, pod_namespace, pod_name, pod_uid, created_at, updated_at`;
export const STEP_COLUMNS = `id, attachment_id, seq, delegate_index, delegate_name, ifname, plugin_index, plugin_type,
  config, state, result, error, attempts, next_attempt_at, teardown_at, pending_ms, created_at, updated_at`;

export function toAttachment(r: Row): Attachment {
  return {
    id: r.id as number,
    containerId: r.container_id as string,
    network: r.network as string,
    ifname: r.ifname as string,
    netns: r.netns as string,
    netnsId: (r.netns_id as string | null) ?? null,
    cniArgs: r.cni_args as string,
    cniPath: r.cni_path as string,
    cniVersion: r.cni_version as string,
    bootId: r.boot_id as string,
    state: r.state as AttachmentState,
    config: r.config as string,
    result: (r.result as string | null) ?? null,
    error: (r.error as string | null) ?? null,
    podNamespace: (r.pod_namespace as string | null) ?? null,
    podName: (r.pod_name as string | null) ?? null,
    podUid: (r.pod_uid as string | null) ?? null,
    createdAt: r.created_at as number,
    updatedAt: r.updated_at as number,
  };
}

export function toStep(r: Row): Step {
  return {
    id: r.id as number,
    attachmentId: r.attachment_id as number,
    seq: r.seq as number,
    delegateIndex: r.delegate_index as number,
    delegateName: r.delegate_name as string,
    ifname: r.ifname as string,
    pluginIndex: r.plugin_index as number,
    pluginType: r.plugin_type as string,
    config: r.config as string,
    state: r.state as StepState,
    result: (r.result as string | null) ?? null,
    error: (r.error as string | null) ?? null,
    attempts: r.attempts as number,
    nextAttemptAt: (r.next_attempt_at as number | null) ?? null,
    teardownAt: (r.teardown_at as number | null) ?? null,
    pendingMs: (r.pending_ms as number | null) ?? 0,
    createdAt: r.created_at as number,
    updatedAt: r.updated_at as number,
  };
}
