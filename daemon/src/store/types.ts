// The domain records the store persists. Nothing outside store/ sees rows or SQL.

import { podLogFields } from '@cni-steward/shared';

/**
 * adding   - ADD in progress (steps being journaled and run)
 * added    - every step added; the runtime holds this attachment
 * deleting - teardown started and not finished (some step still owes a DEL)
 * deleted  - every step torn down (or abandoned): a tombstone that answers repeated DELs
 */
export type AttachmentState = 'adding' | 'added' | 'deleting' | 'deleted';

/**
 * planned    - journaled (synced) with the whole chain before the ADD's first plugin ran; its own
 *              plugin has not been started. Exact within one kernel boot: the step is made `adding`
 *              before its plugin starts, in a commit that survives the daemon's death but not the
 *              kernel's, so a `planned` step of an attachment of another boot may have run (see
 *              docs/architecture.md, "Journal durability").
 * adding     - journaled before the plugin's ADD ran: it may hold resources
 * added      - ADD succeeded; result stored
 * add_failed - ADD returned an error: the plugin may still hold resources, so it gets a DEL
 * deleting   - journaled before the plugin's DEL ran
 * del_failed - DEL returned an error; waits for a retry
 * deleted    - DEL succeeded
 * abandoned  - DEL kept failing past the bound; given up on, loudly
 */
export type StepState =
  'planned' | 'adding' | 'added' | 'add_failed' | 'deleting' | 'del_failed' | 'deleted' | 'abandoned';

export interface AttachmentKey {
  containerId: string;
  network: string;
  ifname: string;
}

export interface Attachment extends AttachmentKey {
  id: number;
  netns: string;
  /** Which namespace `netns` named at the ADD (engine/netns.ts netnsIdentity); null for tombstones and older rows. */
  netnsId?: string | null;
  cniArgs: string;
  cniPath: string;
  cniVersion: string;
  bootId: string;
  state: AttachmentState;
  /** The steward netconf given on ADD (JSON text). Teardown uses it, never the DEL's. */
  config: string;
  /** The result returned to the runtime (JSON text, runtime's cniVersion). */
  result: string | null;
  error: string | null;
  /** The Kubernetes pod, from K8S_POD_NAMESPACE / K8S_POD_NAME / K8S_POD_UID in CNI_ARGS; null when not named. */
  podNamespace: string | null;
  podName: string | null;
  podUid: string | null;
  createdAt: number;
  updatedAt: number;
}

/** Columns a new row may leave out (null): the pod, unnamed by some runtimes, and the netns identity. */
type OptionalFields = 'podNamespace' | 'podName' | 'podUid' | 'netnsId';

export type NewAttachment = Omit<
  Attachment,
  'id' | 'state' | 'result' | 'error' | 'createdAt' | 'updatedAt' | OptionalFields
> &
  Partial<Pick<Attachment, OptionalFields>>;

export interface Step {
  id: number;
  attachmentId: number;
  seq: number;
  delegateIndex: number;
  delegateName: string;
  ifname: string;
  pluginIndex: number;
  pluginType: string;
  /** The plugin's stdin without prevResult (JSON text). */
  config: string;
  state: StepState;
  result: string | null;
  error: string | null;
  attempts: number;
  nextAttemptAt: number | null;
  /** When the first DEL of this step was journaled: the age bound for abandoning counts from here. */
  teardownAt: number | null;
  /**
   * How long the step has been pending teardown while a daemon ran (ms on the monotonic clock,
   * added at each failed DEL): the age bound for abandoning counts this, so a wall-clock step
   * forward does not abandon it early.
   */
  pendingMs: number;
  createdAt: number;
  updatedAt: number;
}

/**
 * The process a step's plugin ran as (schema 3): enough to find its process group again after the
 * daemon died, and to tell it from an unrelated process that got the same pid later.
 */
export interface StepProcess {
  pid: number;
  /** Field 22 of /proc/<pid>/stat. */
  startTime: number;
  bootId: string;
  pidNamespace: string;
}

/** A step journaled as running its plugin (`adding` or `deleting`) and the process it started. */
export interface RunningStep {
  stepId: number;
  attachmentId: number;
  pluginType: string;
  state: StepState;
  process: StepProcess;
}

export type NewStep = Pick<
  Step,
  'attachmentId' | 'seq' | 'delegateIndex' | 'delegateName' | 'ifname' | 'pluginIndex' | 'pluginType' | 'config'
>;

/** The pod an attachment was added for, as recorded (all null for rows older than migration 2). */
export function podOf(a: Pick<Attachment, 'podNamespace' | 'podName' | 'podUid'>): {
  namespace: string | null;
  name: string | null;
  uid: string | null;
} {
  return { namespace: a.podNamespace, name: a.podName, uid: a.podUid };
}

/** The fields every log line about an attachment carries: its key, its pod (when named) and its id. */
export function attachmentLogFields(a: Attachment): Record<string, string | number> {
  return {
    containerId: a.containerId,
    ...podLogFields(podOf(a)),
    network: a.network,
    ifname: a.ifname,
    attachment: a.id,
  };
}
