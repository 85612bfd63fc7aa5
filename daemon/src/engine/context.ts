// What the command modules (add.ts, del.ts, check.ts, gc-status.ts) share: the journal, the plugin
// slots, the teardown machinery and the dispatcher's per-container serialisation. Built once by
// engine.ts; nothing here holds state of its own.

import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import type { Store } from '../store/store.js';
import type { AttachmentKey } from '../store/types.js';
import type { Gate } from './gate.js';
import type { PluginSlots } from './plugin-slots.js';
import type { Teardown } from './teardown.js';

export type DelPolicy = 'defer' | 'strict';

export interface EngineContext {
  store: Store;
  slots: PluginSlots;
  teardown: Teardown;
  gate: Gate;
  log: Logger;
  metrics: Metrics;
  bootId: string;
  delPolicy: DelPolicy;
  /**
   * A runtime DEL is answered before its final journal commit (the last step and the attachment
   * `deleted`), which follows at once, still inside the container's queue: one fsync fewer on the
   * DEL's path. Every plugin still runs only after its own row is on disk.
   */
  answerBeforeFinalCommit: boolean;
  /**
   * A path of the network namespace ADD and CHECK refuse as CNI_NETNS: the daemon's own
   * (/proc/self/ns/net, the host's under hostNetwork). Unset in unit tests, which use it as a netns.
   */
  hostNetns: string | undefined;
  /** Resolves a plugin type to its executable, throwing a CniError when there is none. */
  locate: (type: string, cniPath: string) => string;
  /**
   * Runs `work` after everything queued for this container, holding the gate shared (FIFO per
   * container). Resolves with `work`'s answer as soon as it has one; work passed to `hold` (a failed
   * ADD's rollback) runs after that answer and still before the container's next request.
   */
  serialize<T>(containerId: string, work: (hold: (after: Promise<unknown>) => void) => Promise<T>): Promise<T>;
  /** Attachments whose ADD chain (or its rollback) is running in this process. */
  adding: Set<number>;
  /** Records a netconf problem an operator must fix; each key is logged once (shown in /v1/status). */
  warn(key: string, text: string, fields: Record<string, unknown>): void;
}

export function keyString(k: AttachmentKey): string {
  return JSON.stringify([k.containerId, k.network, k.ifname]);
}
