// The scrape flood, run in its own process so its client work does not share an event loop with the
// ADD latencies being measured. Started by rows/scrape-flood.ts with fork(): on {go} it keeps
// `connections` keep-alive connections each scraping GET /metrics of --metrics-listen back to back
// (what a misconfigured Prometheus fleet or a hostile pod on the node's network can do) until
// {stop}, then reports {done} with the answers it got.

import { Agent, request } from 'node:http';

export interface FloodOrder {
  url: string;
  connections: number;
}

export interface FloodReport {
  ms: number;
  scrapes: number;
  statuses: Record<string, number>;
  bytes: number;
}

function scrape(url: string, agent: Agent): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve) => {
    const req = request(url, { agent }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }));
      res.on('error', () => resolve({ status: -1, bytes }));
    });
    req.on('error', () => resolve({ status: -1, bytes: 0 }));
    req.end();
  });
}

let order: FloodOrder | undefined;
let stopping = false;
let flood: Promise<FloodReport> | undefined;

async function run(o: FloodOrder): Promise<FloodReport> {
  const agent = new Agent({ keepAlive: true, maxSockets: o.connections });
  const statuses: Record<string, number> = {};
  let scrapes = 0;
  let bytes = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: o.connections }, async () => {
      while (!stopping) {
        const r = await scrape(o.url, agent);
        scrapes++;
        bytes += r.bytes;
        statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        // A refused connection would otherwise spin: give the loop a turn.
        if (r.status === -1) await new Promise((res) => setTimeout(res, 10));
      }
    }),
  );
  agent.destroy();
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, scrapes, statuses, bytes };
}

process.on('message', (m: { type: string; order?: FloodOrder }) => {
  if (m.type === 'order' && m.order) {
    order = m.order;
    process.send?.({ type: 'ready' });
  } else if (m.type === 'go' && order) {
    stopping = false;
    flood = run(order);
    process.send?.({ type: 'started' });
  } else if (m.type === 'stop' && flood) {
    stopping = true;
    void flood.then((report) => process.send?.({ type: 'done', report }));
  } else if (m.type === 'exit') {
    process.exit(0);
  }
});
