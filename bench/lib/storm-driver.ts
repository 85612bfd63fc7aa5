// The DEL storm, run in its own process so its client work does not share an event loop with the
// ADD latencies being measured. Started by rows/storm.ts with fork(); on {go} it sends `perContainer`
// DELs for every container, `senders` sequential loops per container (so identical DELs also
// arrive while one is in flight), each on a fresh connection, and reports {done} with the answers.

import { request } from 'node:http';
import { hintHeaders } from '@cni-steward/shared';

export interface StormOrder {
  socket: string;
  containers: string[];
  perContainer: number;
  senders: number;
  /** The steward netconf (with the delegate's logFile). */
  conf: Record<string, unknown>;
}

export interface StormReport {
  ms: number;
  requests: number;
  statuses: Record<string, number>;
}

function del(socket: string, body: string, hints: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const req = request(
      {
        socketPath: socket,
        path: '/v1/cni',
        method: 'POST',
        agent: false,
        // The shipped shim's hint headers (routes/admission.ts in the daemon).
        headers: { ...hints, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(-1));
    req.end(body);
  });
}

async function storm(o: StormOrder): Promise<StormReport> {
  const statuses: Record<string, number> = {};
  const t0 = process.hrtime.bigint();
  const each = Math.ceil(o.perContainer / o.senders);
  await Promise.all(
    o.containers.flatMap((cid) => {
      const env = {
        CNI_COMMAND: 'DEL',
        CNI_CONTAINERID: cid,
        CNI_NETNS: '/var/run/netns/steward-bench',
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/usr/lib/cni',
      };
      const body = JSON.stringify({ env, config: o.conf });
      const hints = hintHeaders(env, o.conf);
      return Array.from({ length: o.senders }, async () => {
        for (let i = 0; i < each; i++) {
          const s = String(await del(o.socket, body, hints));
          statuses[s] = (statuses[s] ?? 0) + 1;
        }
      });
    }),
  );
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  return { ms, requests: Object.values(statuses).reduce((a, b) => a + b, 0), statuses };
}

let order: StormOrder | undefined;
process.on('message', (m: { type: string; order?: StormOrder }) => {
  if (m.type === 'order' && m.order) {
    order = m.order;
    process.send?.({ type: 'ready' });
  } else if (m.type === 'go' && order) {
    void storm(order).then((report) => process.send?.({ type: 'done', report }, () => process.exit(0)));
  }
});
