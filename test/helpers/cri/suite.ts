// What every CRI end-to-end file does before its first test and after its last: under the machine
// lock, a RuntimeHost and a CriNode (containerd's CRI plugin, steward installed or not), a kubelet-like
// driver on it, a skip reason when this machine cannot run pods (a failure under
// STEWARD_E2E_REQUIRE=1), and at the end everything undone and the residue checked.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { TestEnv } from '../env.js';
import { baseSkipReason, skipOrFail } from '../runtimes/skip.js';
import { RuntimeHost } from '../runtimes/host.js';
import { Kubelet } from './kubelet.js';
import { CriNode, type CriNodeOptions } from './node.js';

export const CRI_COMMANDS = ['containerd', 'ctr', 'containerd-shim-runc-v2', 'runc', 'gcc', 'tar', 'ip', 'iptables'];

export interface CriSuite {
  env: TestEnv;
  host: RuntimeHost | undefined;
  node: CriNode | undefined;
  kubelet: Kubelet | undefined;
  /** The describe()'s `skip`: false, or why (printed). */
  skip: string | false;
  /** For after(): undoes everything, then asserts the machine is as it was found. */
  finish: () => Promise<void>;
}

export interface CriSuiteOptions extends CriNodeOptions {
  /** Why the file cannot run besides the machine's reasons (e.g. no Jaeger built): checked before the node starts. */
  skipReason?: string;
}

/** Sets up one CRI node for a test file; `what` names the suite in a skip or failure. */
export async function startCriSuite(name: string, what: string, opts: CriSuiteOptions = {}): Promise<CriSuite> {
  const env = new TestEnv(name);
  let host: RuntimeHost | undefined;
  let node: CriNode | undefined;
  let kubelet: Kubelet | undefined;
  let reason = baseSkipReason(CRI_COMMANDS) ?? opts.skipReason;
  try {
    if (reason === undefined) {
      host = await RuntimeHost.create(env);
      node = await CriNode.start(host, opts).catch((e: Error) => {
        if (process.env.STEWARD_E2E_REQUIRE === '1') throw e;
        reason = `containerd's CRI plugin does not run pods here: ${e.message}`;
        return undefined;
      });
      if (node)
        kubelet = new Kubelet(node.cri, {
          cgroupParent: node.cgroupParent,
          logRoot: join(env.dir, 'pod-logs'),
          tag: env.tag,
        });
    }
  } catch (e) {
    await (host ? host.finish() : env.close());
    throw e;
  }
  let skip: string | false;
  try {
    skip = skipOrFail(what, reason);
  } catch (e) {
    // STEWARD_E2E_REQUIRE=1: the failure leaves nothing behind either.
    await (host ? host.finish() : env.close());
    throw e;
  }
  const finish = async (): Promise<void> => {
    if (!host) return env.close();
    const residue = await host.finish();
    assert.deepEqual(residue, [], 'the suite left the machine as it found it');
    if (node) assert.deepEqual(node.cgroupDirs(), [], "the pods' cgroup parent is removed");
  };
  return { env, host, node, kubelet, skip, finish };
}
