// The one place stewardd's pino loggers are made: JSON lines with an ISO-8601 UTC `time`
// ("2026-11-23T18:40:00.123Z") and the level as a word (`"level":"warn"`), so a person or
// `jq 'select(.level=="error")'` reads them without a table of pino's numbers. README "Logs".
//
// The daemon's own lines go through a LogSink (issue 28 item 5): a stdout nobody reads (a pipe
// whose reader stopped, a container runtime's log FIFO that is stuck) must neither pile lines up in
// memory without a bound (pino's sonic-boom buffers everything it could not write: RSS grew with
// every request) nor stop the event loop (a blocking write to a full pipe, or sonic-boom's sync
// retry on EAGAIN, freezes every request). On a pipe or socket the sink writes without blocking,
// through a non-blocking handle on fd 1, and drops whole lines, counted, while more than
// MAX_PENDING_LOG_BYTES wait; once the reader catches up it logs how many it dropped. A file, a
// TTY or /dev/null is written synchronously, as Node writes its own stdout to them.

import { fstatSync, writeSync } from 'node:fs';
import { Socket } from 'node:net';
import { pino, stdTimeFunctions, type DestinationStream, type Logger } from 'pino';

/** Log bytes waiting for a slow stdout before further lines are dropped (about 10,000 lines). */
export const MAX_PENDING_LOG_BYTES = 4 * 1024 * 1024;

/** `mixin`: fields added to every line (the daemon's: the active trace's id, tracing/context.ts traceLogFields). */
export function createLogger(level: string, dest?: DestinationStream, mixin?: () => object): Logger {
  const opts = {
    level,
    timestamp: stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    ...(mixin ? { mixin } : {}),
  };
  return dest ? pino(opts, dest) : pino(opts);
}

/** What LogSink writes to: a non-blocking stream, or a synchronous write of a whole line. */
type Out = { kind: 'stream'; stream: Socket } | { kind: 'sync'; write: (line: string) => void };

export class LogSink implements DestinationStream {
  /** Lines dropped since start (steward_log_lines_dropped_total). */
  dropped = 0;
  private unreported = 0;
  private broken = false;
  /** Told how many lines were dropped once the sink writes again (the daemon logs it). */
  onResume: ((dropped: number) => void) | undefined;

  constructor(
    private readonly out: Out,
    private readonly maxPendingBytes = MAX_PENDING_LOG_BYTES,
  ) {
    if (out.kind === 'stream') {
      out.stream.on('drain', () => this.resumed());
      // EPIPE (the reader is gone) and the like: nothing more can be written; every line is dropped.
      out.stream.on('error', () => (this.broken = true));
    }
  }

  write(line: string): void {
    const out = this.out;
    if (this.broken) {
      this.drop();
      return;
    }
    if (out.kind === 'stream') {
      // Bytes, not characters: a net.Socket queues a string as it is and counts its UTF-16 length in
      // writableLength, so a bound on characters let three times as many bytes of non-ASCII text wait.
      // Written as a Buffer, the line is queued and counted in bytes.
      const bytes = Buffer.from(line);
      if (out.stream.writableLength + bytes.length > this.maxPendingBytes) {
        this.drop();
        return;
      }
      // O_NONBLOCK is a flag of the open file description, which children share: a child given this
      // stdout or stderr (libuv makes a child's stdio blocking as it starts it) clears it for the
      // daemon too, and the next write to a full pipe would block the loop. Set again at each write
      // (one fcntl pair); the plugin spawner is forked with its stdout ignored for the same reason.
      (out.stream as unknown as { _handle?: { setBlocking?(b: boolean): number } })._handle?.setBlocking?.(false);
      out.stream.write(bytes);
      return;
    }
    try {
      out.write(line);
    } catch {
      this.drop();
      return;
    }
    this.resumed();
  }

  private drop(): void {
    this.dropped++;
    this.unreported++;
  }

  private resumed(): void {
    if (this.unreported === 0) return;
    const n = this.unreported;
    this.unreported = 0;
    this.onResume?.(n);
  }
}

/** The sink for fd 1: non-blocking and bounded on a pipe or socket, synchronous on anything else. */
export function stdoutSink(maxPendingBytes = MAX_PENDING_LOG_BYTES): LogSink {
  let pipe = false;
  try {
    const st = fstatSync(1);
    pipe = st.isFIFO() || st.isSocket();
  } catch {
    /* no stdout: written synchronously, and every write fails and is counted */
  }
  if (pipe) {
    // A pipe handle of its own on fd 1 (libuv makes the fd non-blocking): writes that do not fit
    // wait in its queue, bounded above, and never block the loop. Unref'd: it keeps nothing alive.
    const stream = new Socket({ fd: 1, readable: false, writable: true });
    stream.unref();
    return new LogSink({ kind: 'stream', stream }, maxPendingBytes);
  }
  return new LogSink(
    {
      kind: 'sync',
      write: (line) => {
        const b = Buffer.from(line);
        for (let off = 0; off < b.length;) off += writeSync(1, b, off);
      },
    },
    maxPendingBytes,
  );
}

/** The daemon's logger (`stewardd run`), on a bounded stdout sink; the sink's counters feed the metrics. */
export function createDaemonLogger(level: string, mixin?: () => object): { log: Logger; sink: LogSink } {
  const sink = stdoutSink();
  const log = createLogger(level, sink, mixin);
  sink.onResume = (n) =>
    log.warn({ droppedLines: n }, 'log lines dropped: stdout was not read (steward_log_lines_dropped_total)');
  return { log, sink };
}
