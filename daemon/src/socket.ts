// Preparing the Unix socket path: its directory 0700, a stale socket replaced, a live one refused.

import { chmodSync, existsSync, mkdirSync, unlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname } from 'node:path';

function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ path });
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

export async function prepareSocketPath(path: string): Promise<void> {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  if (!existsSync(path)) return;
  if (await answers(path)) throw new Error(`another stewardd is already serving on ${path}`);
  unlinkSync(path);
}

export function restrictSocket(path: string): void {
  chmodSync(path, 0o600);
}
