// OpenTelemetry's core (its W3C propagator) is loaded only when a request brings a trace context or
// spans are exported: most runtimes never send one, and importing it costs the daemon ~11 MiB of
// resident memory for its whole life (docs/performance.md, restart row). A module-load hook sees
// every module this process loads, so a static import of it anywhere in the daemon fails here.
// Its own file: node:test runs each file in a process of its own, and no other test may load it first.

import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import * as nodeModule from 'node:module';
import { test } from 'node:test';

/** module.registerHooks (Node 22.15+; the @types/node this repository pins predate it). */
type LoadHook = (url: string, ctx: unknown, next: (url: string, ctx: unknown) => unknown) => unknown;
const { registerHooks } = nodeModule as unknown as { registerHooks(hooks: { load: LoadHook }): unknown };

const loaded: string[] = [];
registerHooks({
  load(url, ctx, next) {
    loaded.push(url);
    return next(url, ctx);
  },
});
const coreLoaded = () => loaded.some((u) => u.includes('/@opentelemetry/core/'));

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

test("the daemon's modules, and a request without a trace context, do not load OpenTelemetry's core; the first with one does", async () => {
  // Everything stewardd's start imports (daemon.ts builds the daemon from all its parts).
  await import('../../daemon/src/daemon.js');
  const { Tracing } = await import('../../daemon/src/tracing/tracing.js');
  const { inRequestContext, traceEnv } = await import('../../daemon/src/tracing/context.js');
  const { context } = await import('@opentelemetry/api');
  assert.ok(
    loaded.some((u) => u.includes('/daemon/src/server.')),
    'the hook sees the modules the import loaded',
  );
  assert.equal(coreLoaded(), false, 'loaded by a static import');

  const t = new Tracing();
  const serve = (headers: Record<string, string>) => {
    const req = { headers } as unknown as IncomingMessage;
    return new Promise<IncomingMessage>((served) => t.listener(() => served(req))(req, {} as ServerResponse));
  };
  await serve({});
  assert.equal(coreLoaded(), false, 'loaded for a request that brought no context');

  const req = await serve({ traceparent: TRACEPARENT });
  assert.equal(coreLoaded(), true);
  assert.deepEqual(
    inRequestContext(req, () => traceEnv(context.active())),
    { TRACEPARENT },
    "the first request with a context waited for the propagator and hands the runtime's on",
  );
});
