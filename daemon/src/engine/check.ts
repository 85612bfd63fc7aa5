// CHECK: every step's plugin is asked to CHECK with its stored config and its delegate's stored
// result as prevResult. A delegate declared before CHECK existed (< 0.4.0) is checked at a version
// its plugin supports (check-version.ts), never skipped; only disableCheck opts a delegate out.

import { CniError, ErrorCode, convertResult, versionAtLeast, type CniEnv } from '@cni-steward/shared';
import type { AttachmentKey } from '../store/types.js';
import { checkVersionFor } from './check-version.js';
import type { EngineContext } from './context.js';
import { Priority } from './limiter.js';
import { parseStewardConf } from './netconf.js';
import { netnsProblem } from './netns.js';
import { finalResults } from './teardown.js';
import { pluginCall, requestTarget } from '../plugins/call.js';
import { parseJson } from '../faithful-json.js';

/** CHECK of one attachment; runs inside the container's queue. */
export async function checkAttachment(ctx: EngineContext, env: CniEnv, key: AttachmentKey): Promise<string> {
  const { store } = ctx;
  const a = store.currentAttachment(key);
  // A row with no steps ran no plugin: a DEL passed through for a container never added leaves one.
  if (!a || (a.state === 'deleted' && store.stepsOf(a.id).length === 0)) {
    throw new CniError(
      ErrorCode.UnknownContainer,
      `container ${key.containerId} has no attachment on network ${key.network} interface ${key.ifname}`,
    );
  }
  if (a.state !== 'added') {
    throw new CniError(
      ErrorCode.AttachmentGone,
      `attachment of container ${key.containerId} on ${key.network}/${key.ifname} is ${a.state}, not added`,
    );
  }
  const nsWhy = await netnsProblem(env.netns, ctx.hostNetns);
  if (nsWhy) throw new CniError(ErrorCode.InvalidEnv, nsWhy);
  const stored = parseStewardConf(parseJson(a.config), a.ifname);
  const steps = store.stepsOf(a.id);
  const finals = finalResults(steps);
  for (const step of steps) {
    const d = stored.delegates[step.delegateIndex];
    if (!d || d.disableCheck) continue;
    const target = requestTarget(env, step.ifname);
    const version = versionAtLeast(d.cniVersion, '0.4.0')
      ? d.cniVersion
      : await checkVersionFor(step.pluginType, d.name, (probe) =>
          ctx.slots.run(Priority.Add, pluginCall(probe.command, probe.type, probe.stdin, target)),
        );
    const stdin: Record<string, unknown> = {
      ...(parseJson(step.config) as Record<string, unknown>),
      cniVersion: version,
    };
    const prev = finals.get(step.delegateIndex);
    if (prev) stdin.prevResult = convertResult(prev, version);
    await ctx.slots.run(Priority.Add, pluginCall('CHECK', step.pluginType, stdin, target));
  }
  return '';
}
