// The CLI's answer to stdout, and what a write that fails means: the answer is lost (a full disk, a
// closed pipe), so the command fails with its own exit code. console.log swallowed the error: a
// `stewardd status --check > /dev/full` exited 0 having printed nothing (hostile run, 1 Dec).

import { CliError, Exit } from './client.js';

let listening = false;

/** Writes `text` and a newline to stdout; rejects with exit 6 when the write fails. */
export function writeStdout(text: string): Promise<void> {
  // Without a listener, the stream's 'error' event after a failed write would end the process.
  if (!listening) process.stdout.on('error', () => undefined);
  listening = true;
  return new Promise((resolve, reject) => {
    process.stdout.write(`${text}\n`, (err) => {
      if (!err) return resolve();
      const code = (err as NodeJS.ErrnoException).code ?? err.message;
      reject(new CliError(`the answer could not be written to stdout (${code}): it is lost`, Exit.OutputFailed));
    });
  });
}
