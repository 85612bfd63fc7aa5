// Filling a journal with a busy node's live attachments, in one commit, through the Store's own
// methods (so schema and rows are exactly what the daemon writes): for start-up and scrape
// benchmarks (bench/) and the tests that need a large journal (test/e2e/image, test/unit/store).

import { Store } from './store.js';

/** A bridge step's result, as Debian's bridge + host-local return one. */
const STEP_RESULT = JSON.stringify({
  cniVersion: '1.0.0',
  interfaces: [
    { name: 'cni0', mac: '0a:58:0a:f4:01:01' },
    { name: 'veth1a2b3c4d', mac: '12:34:56:78:9a:bc' },
    { name: 'eth0', mac: '0a:58:0a:f4:01:05', sandbox: '/var/run/netns/cni-00000000' },
  ],
  ips: [{ address: '10.244.1.5/24', gateway: '10.244.1.1', interface: 2 }],
  routes: [{ dst: '0.0.0.0/0' }],
  dns: {},
});

interface DelegateShape {
  name: string;
  cniVersion: string;
  plugins: Array<Record<string, unknown>>;
}

/**
 * Writes `count` live (added) attachments of boot `bootId` into the journal at dbPath, each one step
 * of the first delegate's first plugin of `config` (a steward netconf), in one transaction.
 */
export function populateJournal(dbPath: string, count: number, bootId: string, config: Record<string, unknown>): void {
  const store = new Store(dbPath);
  try {
    const delegate = (config.delegates as DelegateShape[] | undefined)?.[0];
    const plugin = delegate?.plugins[0];
    const stepConfig = JSON.stringify({ ...plugin, name: delegate?.name, cniVersion: delegate?.cniVersion });
    const configText = JSON.stringify(config);
    store.atomic(() => {
      for (let i = 0; i < count; i++) {
        const id = i.toString(16).padStart(8, '0');
        const a = store.createAttachment({
          containerId: `${id}${'0'.repeat(56)}`,
          network: 'steward',
          ifname: 'eth0',
          netns: `/var/run/netns/cni-${id}`,
          cniArgs: `K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod-${i}`,
          podNamespace: 'bench',
          podName: `pod-${i}`,
          cniPath: '/opt/cni/bin',
          cniVersion: '1.0.0',
          bootId,
          config: configText,
        });
        const step = store.insertStep({
          attachmentId: a.id,
          seq: 0,
          delegateIndex: 0,
          delegateName: delegate?.name ?? 'podnet',
          ifname: 'eth0',
          pluginIndex: 0,
          pluginType: String(plugin?.type),
          config: stepConfig,
        });
        store.setStepAdded(step.id, STEP_RESULT);
        store.setAttachmentAdded(a.id, STEP_RESULT);
      }
    });
  } finally {
    store.close();
  }
}
