// The daemon's log sink (daemon/src/log.ts, issue 28 item 5): on a stream nobody reads, whole lines
// are dropped and counted once the bound is reached, and the count is reported when it drains.

import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { LogSink } from '../../daemon/src/log.js';

test('a stream nobody reads: lines past the bound are dropped and counted, and reported once it drains', async () => {
  const stream = new PassThrough({ highWaterMark: 256 });
  const sink = new LogSink({ kind: 'stream', stream: stream as unknown as Socket }, 1000);
  const reported: number[] = [];
  sink.onResume = (n) => reported.push(n);
  const line = `${'x'.repeat(99)}\n`;
  for (let i = 0; i < 100; i++) sink.write(line);
  assert.ok(stream.writableLength <= 1000, `${stream.writableLength} bytes held`);
  // 1,000 bytes held in its writable side (and a little more passed on to its unread readable side).
  assert.ok(sink.dropped >= 85 && sink.dropped <= 90, `${sink.dropped} dropped`);
  const kept: Buffer[] = [];
  stream.on('data', (b: Buffer) => kept.push(b));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(reported, [sink.dropped]);
  assert.equal(Buffer.concat(kept).length, (100 - sink.dropped) * 100, 'whole lines only');
  sink.write(line);
  assert.equal(sink.dropped, reported[0], 'written again once drained');
});

test('a synchronous sink that fails drops the line and counts it', () => {
  let fail = true;
  const out: string[] = [];
  const sink = new LogSink({
    kind: 'sync',
    write: (l) => {
      if (fail) throw Object.assign(new Error('EAGAIN'), { code: 'EAGAIN' });
      out.push(l);
    },
  });
  const reported: number[] = [];
  sink.onResume = (n) => reported.push(n);
  sink.write('a\n');
  sink.write('b\n');
  assert.equal(sink.dropped, 2);
  fail = false;
  sink.write('c\n');
  assert.deepEqual(out, ['c\n']);
  assert.deepEqual(reported, [2]);
});
