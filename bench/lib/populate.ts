// Filling a stewardd database quickly for start-up benchmarks: the daemon's own Store class (so
// schema and rows are exactly what the daemon writes), with every insert in one transaction on
// the Store's connection instead of one fsync'd transaction per row.

import type Database from 'better-sqlite3';
import { Store } from '../../daemon/src/store/store.js';

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

/** Writes `count` live (added) attachments of boot `bootId`, each one bridge step, like a busy node's. */
export function populate(dbPath: string, count: number, bootId: string, config: Record<string, unknown>): void {
  const store = new Store(dbPath);
  try {
    const db = (store as unknown as { db: Database.Database }).db;
    const delegate = (
      config.delegates as Array<{ name: string; cniVersion: string; plugins: Array<Record<string, unknown>> }>
    )[0];
    const stepConfig = JSON.stringify({
      ...delegate?.plugins[0],
      name: delegate?.name,
      cniVersion: delegate?.cniVersion,
    });
    const configText = JSON.stringify(config);
    db.transaction(() => {
      for (let i = 0; i < count; i++) {
        const containerId = `${i.toString(16).padStart(8, '0')}${'0'.repeat(56)}`;
        const netns = `/var/run/netns/cni-${i.toString(16).padStart(8, '0')}`;
        const a = store.createAttachment({
          containerId,
          network: 'steward',
          ifname: 'eth0',
          netns,
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
          pluginType: String(delegate?.plugins[0]?.type),
          config: stepConfig,
        });
        store.setStepAdded(step.id, STEP_RESULT);
        store.setAttachmentAdded(a.id, STEP_RESULT);
      }
    })();
  } finally {
    store.close();
  }
}
