// The daemon's log sink (daemon/src/log.ts) on a real net.Socket, as stdoutSink makes one on a pipe:
// its bound is in bytes. A net.Socket queues a string as it is and counts its UTF-16 length in
// writableLength (unlike log-sink.test.ts's PassThrough, which turns strings into Buffers), so a
// bound on characters let three times as many bytes of '€' text wait (issue 41).

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { LogSink } from '../../daemon/src/log.js';

const dir = mkdtempSync(join(tmpdir(), 'stw-logsock-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('on a real socket the bound counts bytes: multi-byte lines are dropped once their bytes fill it, whole lines arrive', async () => {
  const path = join(dir, 'log.sock');
  const received: Buffer[] = [];
  let server!: Socket;
  const srv = createServer((c) => {
    server = c;
    c.on('data', (b: Buffer) => received.push(b));
  });
  await new Promise<void>((r) => srv.listen(path, r));
  try {
    const client = connect(path);
    const max = 64 * 1024;
    const sink = new LogSink({ kind: 'stream', stream: client }, max);
    // Written before the connection is up: every line the sink takes waits in the socket's queue
    // (none has reached the kernel yet), so what it took is what it holds.
    const line = `{"msg":"${'€'.repeat(1000)}"}\n`; // 1,011 characters, 3,011 bytes
    const lineBytes = Buffer.byteLength(line);
    for (let i = 0; i < 100; i++) sink.write(line);
    const taken = 100 - sink.dropped;
    assert.ok(
      taken * lineBytes <= max,
      `${taken} lines of ${lineBytes} bytes taken: ${taken * lineBytes} bytes held over a bound of ${max}`,
    );
    assert.equal(taken, Math.floor(max / lineBytes), 'as many whole lines as fit in the bound');
    assert.equal(client.writableLength, taken * lineBytes, 'the queue counts bytes');
    // Once connected, the reader gets exactly the lines taken: whole, and the text intact.
    await new Promise<void>((r) => client.once('connect', () => r()));
    await new Promise<void>((r) => {
      const check = () => (Buffer.concat(received).length >= taken * lineBytes ? r() : setTimeout(check, 10));
      check();
    });
    assert.equal(Buffer.concat(received).toString('utf8'), line.repeat(taken));
    client.destroy();
    server.destroy();
  } finally {
    srv.close();
  }
});
