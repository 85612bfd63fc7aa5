// When STATUS last told the runtime "not ready", and why (issue 37): the network's readiness is what
// containerd 2.x turns into the node's NotReady, so an operator must see every time steward said
// no. Two sources: stewardd's own answers (not ready, shutting down), and the note the shim leaves
// beside the socket when it answers on its own because stewardd could not (unreachable, frozen,
// grace expired: shim/restart.go writeNotReadyNote), read when asked. The later one is reported, in
// `/v1/status` (`stewardd status`) and as steward_status_last_not_ready_timestamp_seconds.

import { Gauge, type Registry } from 'prom-client';
import { STATUS_NOT_READY_SUFFIX } from '@cni-steward/shared';
import { readRegularFile } from './lifecycle/files.js';

export interface NotReadyAnswer {
  /** ms since the epoch */
  at: number;
  /** unreachable | frozen | grace expired (the shim's words) | not ready | shutting down (stewardd's) */
  why: string;
  /** the message the runtime got */
  reason: string;
  /** who answered: the shim on its own, or stewardd */
  from: 'shim' | 'stewardd';
}

/** The longest reason kept from the shim's note (it is read from a file any root process could write). */
const MAX_REASON_CHARS = 512;

export class StatusNotReady {
  private own: NotReadyAnswer | undefined;
  private readonly gauge: Gauge<'why' | 'from'>;

  constructor(
    private readonly socket: string,
    registry: Registry,
  ) {
    this.gauge = new Gauge({
      name: 'steward_status_last_not_ready_timestamp_seconds',
      help: 'When CNI STATUS last answered not ready (Unix time), by why (unreachable, frozen, grace expired, not ready, shutting down) and who answered (shim, stewardd); absent until it happens',
      labelNames: ['why', 'from'] as const,
      registers: [registry],
      collect: () => {
        this.gauge.reset();
        const last = this.last();
        if (last) this.gauge.set({ why: last.why, from: last.from }, last.at / 1000);
      },
    });
  }

  /** stewardd answered a STATUS not ready itself. */
  record(why: string, reason: string): void {
    this.own = { at: Date.now(), why, reason, from: 'stewardd' };
  }

  /** The latest not-ready answer the node's runtime got, from either side. */
  last(): NotReadyAnswer | undefined {
    const shim = this.shimNote();
    if (!shim) return this.own;
    if (!this.own) return shim;
    return shim.at > this.own.at ? shim : this.own;
  }

  private shimNote(): NotReadyAnswer | undefined {
    let raw: unknown;
    try {
      // Only a regular file, never blocking (a FIFO here held the loop at the first /v1/status).
      raw = JSON.parse(
        readRegularFile(`${this.socket}${STATUS_NOT_READY_SUFFIX}`, 64 * 1024)
          .toString('utf8')
          .slice(0, 4096),
      );
    } catch {
      return undefined;
    }
    const n = raw as { at?: unknown; why?: unknown; reason?: unknown };
    if (typeof n.at !== 'number' || !Number.isFinite(n.at) || typeof n.why !== 'string' || typeof n.reason !== 'string')
      return undefined;
    const why = ['unreachable', 'frozen', 'grace expired'].includes(n.why) ? n.why : 'unknown';
    return { at: n.at, why, reason: n.reason.slice(0, MAX_REASON_CHARS), from: 'shim' };
  }
}
