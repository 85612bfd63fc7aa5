// The Bun-compiled shim's stdin and stdout (swapped in for stdio.ts by scripts/bundle-shim.mjs):
// Bun's own file I/O instead of node:fs, whose loading costs the compiled shim ~2 ms CPU of a
// ~10 ms call (docs/performance.md, "The shim call"). Same contract as stdio.ts.

/** Bun's globals as the shim uses them; not in Node's types. */
declare const Bun: {
  stdin: { stream(): ReadableStream<Uint8Array> };
  stdout: unknown;
  write(dest: unknown, data: string): Promise<number>;
};

/** stdin, read until EOF or until more than `limit` bytes arrived (the caller rejects those). */
export async function readStdin(limit: number): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = Bun.stdin.stream().getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    total += value.length;
    if (total > limit) break;
  }
  return Buffer.concat(chunks);
}

/** Writes all of `text` to stdout (Bun.write resolves once every byte is written). */
export async function writeStdout(text: string): Promise<void> {
  await Bun.write(Bun.stdout, text);
}
