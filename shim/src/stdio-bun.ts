// The Bun-compiled shim's stdin and stdout (swapped in for stdio.ts by scripts/bundle-shim.mjs):
// Bun's own file I/O instead of node:fs, whose loading costs the compiled shim ~2 ms CPU of a
// ~10 ms call (docs/performance.md, "The shim call"). Same contract as stdio.ts.

/** Bun's globals as the shim uses them; not in Node's types. */
declare const Bun: {
  stdin: { stream(): ReadableStream<Uint8Array> };
  stdout: unknown;
  write(dest: unknown, data: string): Promise<number>;
};

/**
 * stdin, read until EOF or until more than `limit` bytes arrived (the caller rejects those);
 * undefined when it is still open after `timeoutMs` (same contract as stdio.ts).
 */
export async function readStdin(limit: number, timeoutMs: number): Promise<Buffer | undefined> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = Bun.stdin.stream().getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), timeoutMs)));
  try {
    for (;;) {
      const step = await Promise.race([reader.read(), expired]);
      if (step === undefined) return undefined;
      if (step.done) break;
      chunks.push(step.value);
      total += step.value.length;
      if (total > limit) break;
    }
  } finally {
    clearTimeout(timer);
  }
  return Buffer.concat(chunks);
}

/** Writes all of `text` to stdout (Bun.write resolves once every byte is written). */
export async function writeStdout(text: string): Promise<void> {
  // Nothing to print (a DEL's or STATUS's success): Bun.write of "" would truncate a stdout that
  // is a file the caller appends to.
  if (text === '') return;
  await Bun.write(Bun.stdout, text);
}
