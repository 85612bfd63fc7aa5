// Running one delegate plugin in one of the global execution slots. Every plugin execution of the
// engine (ADD, DEL, CHECK, VERSION, GC, STATUS) goes through here, so the limit on concurrent
// executions and its priorities (limiter.ts) hold for all of them.

import type { PluginCall, PluginRunner } from '../plugins/executor.js';
import type { Limiter, PriorityValue } from './limiter.js';

export class PluginSlots {
  constructor(
    readonly limiter: Limiter,
    private readonly runner: PluginRunner,
  ) {}

  /** Waits for a slot at `priority`, runs the plugin, frees the slot; resolves with its decoded stdout. */
  run(priority: PriorityValue, call: PluginCall): Promise<unknown> {
    return this.limiter.run(priority, () => this.runner(call));
  }
}
