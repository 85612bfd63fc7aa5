// A delegate run's part of the trace (plugins/executor.ts): its span while exporting, with the pid,
// exit and CNI code of the run; not exporting, the runtime's context handed on unchanged. Either way
// the TRACEPARENT/TRACESTATE the delegate is given, as libcni gives a plugin the runtime's.

import { performance } from 'node:perf_hooks';
import { context, trace, SpanStatusCode, type Context, type Span } from '@opentelemetry/api';
import { CniError } from '@cni-steward/shared';
import { ATTR, traceEnv } from './context.js';

/** What plugins/ tells of a delegate run. */
export interface DelegateInfo {
  type: string;
  command: string;
  containerId: string;
  ifname: string;
  /** The delegate network's name (its netconf's `name`). */
  network?: string | undefined;
}

/** What the spawner told of a finished run. */
export interface DelegateOutcome {
  code: number | null;
  signal: string | null;
  timedOut: boolean;
}

/** One delegate run's part of the trace. */
export interface DelegateTrace {
  /** TRACEPARENT and TRACESTATE for its environment: its own span's (or, not exporting, the runtime's). */
  readonly env: Record<string, string>;
  /** `onStart` run in the delegate's context (its journal commit is the delegate's child), noting the pid. */
  onStart<P extends { pid: number }>(fn: ((p: P) => void) | undefined): ((p: P) => void) | undefined;
  exited(o: DelegateOutcome): void;
  /** Ends its span; `err` is what the run rejected with. */
  end(err?: unknown): void;
}

/** Not exporting: the runtime's context, if the request brought one, handed on unchanged. */
export function passThrough(parent: Context): DelegateTrace | undefined {
  if (trace.getSpanContext(parent) === undefined) return undefined;
  return { env: traceEnv(parent), onStart: (fn) => fn, exited: () => undefined, end: () => undefined };
}

/** A delegate's own span, a child of the request's (or a root of its own outside any request). */
export class RecordingDelegate implements DelegateTrace {
  readonly env: Record<string, string>;

  constructor(
    private readonly span: Span,
    private readonly ctx: Context,
    private readonly anchor: number,
  ) {
    this.env = traceEnv(ctx);
  }

  onStart<P extends { pid: number }>(fn: ((p: P) => void) | undefined): (p: P) => void {
    return context.bind(this.ctx, (p: P) => {
      this.span.setAttribute(ATTR.pid, p.pid);
      fn?.(p);
    });
  }

  exited(o: DelegateOutcome): void {
    if (o.code !== null) this.span.setAttribute(ATTR.exitCode, o.code);
    if (o.signal !== null) this.span.setAttribute(ATTR.signal, o.signal);
    if (o.timedOut) this.span.setAttribute(ATTR.timedOut, true);
  }

  end(err?: unknown): void {
    if (err === undefined) {
      this.span.setAttribute(ATTR.code, 0);
    } else {
      const e = CniError.from(err);
      this.span.setAttribute(ATTR.code, e.code);
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: e.message });
    }
    this.span.end(this.anchor + performance.now());
  }
}
