// The CLI's answer to stdout, and what a write that fails means: the answer is lost (a full disk, a
// closed pipe), so the command fails with its own exit code. console.log swallowed the error: a
// `stewardd status --check > /dev/full` exited 0 having printed nothing (hostile run, 1 Dec).

import { fstatSync, writeSync } from 'node:fs';
import { CliError, Exit } from './client.js';

let listening = false;

/** Writes `text` and a newline to stdout; rejects with exit 6 when the write fails. */
export function writeStdout(text: string): Promise<void> {
  if (toFile()) {
    try {
      writeAll(Buffer.from(`${text}\n`));
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(lost(err as Error));
    }
  }
  // Without a listener, the stream's 'error' event after a failed write would end the process.
  if (!listening) process.stdout.on('error', () => undefined);
  listening = true;
  return new Promise((resolve, reject) => {
    process.stdout.write(`${text}\n`, (err) => (err ? reject(lost(err)) : resolve()));
  });
}

/**
 * Whether stdout is a file or a device other than a terminal. Node writes those with one
 * writeSync and drops its count: on a disk with less room than the answer, the kernel took part of
 * it without an error and the rest was lost, exit 0 (review, 1 Dec). Written here to the last byte,
 * the write after a short one fails with ENOSPC.
 */
function toFile(): boolean {
  try {
    const st = fstatSync(1);
    return st.isFile() || (st.isCharacterDevice() && !process.stdout.isTTY);
  } catch {
    return false;
  }
}

function writeAll(data: Buffer): void {
  for (let off = 0; off < data.length;) {
    const n = writeSync(1, data, off);
    if (n <= 0) throw Object.assign(new Error('no byte written'), { code: 'ENOSPC' });
    off += n;
  }
}

function lost(err: Error): CliError {
  const code = (err as NodeJS.ErrnoException).code ?? err.message;
  return new CliError(`the answer could not be written to stdout (${code}): it is lost or cut off`, Exit.OutputFailed);
}
