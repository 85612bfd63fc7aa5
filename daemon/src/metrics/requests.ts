// The CNI requests' metrics: each answer by command and code, its time, the delegate plugins it ran,
// its wait in the container's queue, DELs answered by joining another, and shims of another protocol.

import { Counter, Histogram, type Registry } from 'prom-client';
import { UNVERSIONED_PROTOCOL } from '@cni-steward/shared';

/** What `instrument` needs of a plugin call: plugins/executor.ts's PluginCall has it. */
interface PluginCallLabels {
  type: string;
  command: string;
  /** Told the plugin's process once it exists: only then is it an execution. */
  onStart?: ((p: never) => void) | undefined;
}

export class RequestMetrics {
  /** Every answered CNI request by command and CNI error code ("0": success). */
  readonly requests: Counter<'command' | 'code'>;
  readonly requestSeconds: Histogram<'command'>;
  readonly pluginExecutions: Counter<'plugin' | 'command' | 'outcome'>;
  readonly pluginSeconds: Histogram<'plugin' | 'command'>;
  readonly queueWaitSeconds: Histogram;
  readonly coalescedDels: Counter<'how'>;
  readonly versionSkew: Counter<'shim_protocol'>;
  /** STATUS verdicts decided after their shim stopped waiting (lifecycle/alive-beacon.ts). */
  readonly statusAfterShimLeft: Counter;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'steward_cni_requests_total',
      help: 'CNI requests answered, by command and CNI error code (0 = success)',
      labelNames: ['command', 'code'] as const,
      registers,
    });
    this.requestSeconds = new Histogram({
      name: 'steward_cni_request_duration_seconds',
      help: 'Time to answer a CNI request',
      labelNames: ['command'] as const,
      registers,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    });
    this.pluginExecutions = new Counter({
      name: 'steward_plugin_executions_total',
      help: 'Delegate plugin executions, by plugin type, command and outcome',
      labelNames: ['plugin', 'command', 'outcome'] as const,
      registers,
    });
    this.pluginSeconds = new Histogram({
      name: 'steward_plugin_duration_seconds',
      help: 'Wall time of one delegate plugin execution, by plugin type and command',
      labelNames: ['plugin', 'command'] as const,
      registers,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    });
    this.queueWaitSeconds = new Histogram({
      name: 'steward_queue_wait_seconds',
      help: "Time a request or teardown waited in its container's queue before it started",
      registers,
      buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    });
    this.statusAfterShimLeft = new Counter({
      name: 'steward_status_after_shim_left_total',
      help: 'STATUS verdicts decided after the shim had stopped waiting: it answered from the alive beacon, or 50 at its bound',
      registers,
    });
    this.coalescedDels = new Counter({
      name: 'steward_del_coalesced_total',
      help: 'DELs answered by joining one queued or in flight, or by a tombstone',
      labelNames: ['how'] as const,
      registers,
    });
    this.versionSkew = new Counter({
      name: 'steward_version_skew_seen_total',
      help: 'Shim requests refused because the shim speaks a protocol version stewardd does not (code 108)',
      labelNames: ['shim_protocol'] as const,
      registers,
    });
    // Series that exist from the first scrape, so rate() and error ratios have a denominator.
    for (const command of ['ADD', 'DEL', 'CHECK']) this.requests.inc({ command, code: '0' }, 0);
    this.coalescedDels.inc({ how: 'joined' }, 0);
    this.coalescedDels.inc({ how: 'tombstone' }, 0);
    // Exported at 0 from the start: an alert's increase() over a series that first appears at 1
    // misses a first lone skew. An older shim (protocol 1) is the skew a node meets.
    this.versionSkew.inc({ shim_protocol: String(UNVERSIONED_PROTOCOL) }, 0);
  }

  /**
   * Wraps a plugin runner so every execution is counted and timed by plugin type and command. Only
   * one whose process started: a pass-through DEL names whatever types its netconf says, and each
   * type never found made 17 series of executions that never ran (hostile run, 1 Dec).
   */
  instrument<C extends PluginCallLabels, R>(run: (call: C) => Promise<R>): (call: C) => Promise<R> {
    return async (call) => {
      const labels = { plugin: call.type, command: call.command };
      const stop = this.pluginSeconds.startTimer(labels);
      let started = false;
      const onStart = call.onStart;
      const counted = {
        ...call,
        onStart: (p: Parameters<NonNullable<C['onStart']>>[0]) => {
          started = true;
          onStart?.(p);
        },
      };
      let outcome = 'error';
      try {
        const out = await run(counted);
        outcome = 'ok';
        return out;
      } finally {
        if (started) {
          this.pluginExecutions.inc({ ...labels, outcome });
          stop();
        }
      }
    };
  }
}
