// Draining before uninstall: teardowns still pending in the daemon's queue get a bounded time to
// finish (asking the daemon to retry them now), and whatever is left is reported by id. With no
// daemon answering, nothing can progress: the database is read and its pending steps reported.

import { existsSync } from 'node:fs';
import type { Logger } from 'pino';
import { Store } from '../store/store.js';
import { socketRequest } from './socket-http.js';

export interface Leftover {
  step: number;
  attachment: number;
  containerId: string | undefined;
  plugin: string;
  lastError: string | null;
}

export interface DrainReport {
  /** Where the answer came from. */
  source: 'daemon' | 'database' | 'nothing';
  leftovers: Leftover[];
}

export interface DrainOptions {
  socket: string;
  dbPath: string;
  timeoutMs: number;
  log: Logger;
  pollMs?: number;
}

async function pendingFromDaemon(socket: string): Promise<Leftover[] | undefined> {
  try {
    const r = await socketRequest(socket, 'GET', '/v1/teardowns', 5000);
    if (r.status !== 200) return undefined;
    const body = JSON.parse(r.body) as { pending: Array<Leftover & { attachment: number }> };
    return body.pending.map((p) => ({
      step: p.step,
      attachment: p.attachment,
      containerId: p.containerId ?? undefined,
      plugin: p.plugin,
      lastError: p.lastError,
    }));
  } catch {
    return undefined;
  }
}

function pendingFromDatabase(dbPath: string): Leftover[] | undefined {
  if (!existsSync(dbPath)) return undefined;
  const store = new Store(dbPath);
  try {
    return store.pendingTeardownSteps().map((s) => ({
      step: s.id,
      attachment: s.attachmentId,
      containerId: store.getAttachment(s.attachmentId)?.containerId,
      plugin: s.pluginType,
      lastError: s.error,
    }));
  } finally {
    store.close();
  }
}

export async function drain(o: DrainOptions): Promise<DrainReport> {
  let pending = await pendingFromDaemon(o.socket);
  if (pending === undefined) {
    const fromDb = pendingFromDatabase(o.dbPath);
    if (fromDb === undefined) return { source: 'nothing', leftovers: [] };
    o.log.warn(
      { socket: o.socket, db: o.dbPath, pending: fromDb.length },
      'stewardd is not answering; pending teardowns cannot be drained',
    );
    return { source: 'database', leftovers: fromDb };
  }
  const deadline = Date.now() + o.timeoutMs;
  if (pending.length > 0) {
    o.log.info({ pending: pending.length, timeoutMs: o.timeoutMs }, 'draining pending teardowns before uninstall');
    // Skip the backoff: the node is going away, so try everything now, then poll until the deadline.
    await socketRequest(o.socket, 'POST', '/v1/teardowns/retry', Math.max(1000, o.timeoutMs)).catch(() => undefined);
  }
  while (pending.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, Math.min(o.pollMs ?? 500, Math.max(0, deadline - Date.now()))));
    pending = (await pendingFromDaemon(o.socket)) ?? pending;
  }
  return { source: 'daemon', leftovers: pending };
}
