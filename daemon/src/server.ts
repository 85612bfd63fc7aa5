// The fastify app: explicit routes, the one error handler and the one CNI-code -> HTTP table.
// It only builds the app; listening, signals and shutdown belong to main.ts.

import Fastify, { LogController } from 'fastify';
import type { Logger } from 'pino';
import { CniError, ErrorCode, LATEST_VERSION, MAX_NETCONF_BYTES } from '@cni-steward/shared';
import { cniRoutes } from './routes/cni.js';
import { degradedRoutes, type DegradedDeps } from './routes/degraded.js';
import type { AppDeps } from './routes/deps.js';
import { capText, MAX_ECHO_DETAILS_BYTES, MAX_ECHO_MSG_BYTES } from './routes/echo.js';
import { statusRoutes } from './routes/status.js';

/** CNI error code -> HTTP status. The shim only needs 200 vs not; humans with curl get the rest. */
export function httpStatusFor(code: number): number {
  switch (code) {
    case ErrorCode.IncompatibleVersion:
    case ErrorCode.UnsupportedField:
    case ErrorCode.InvalidEnv:
    case ErrorCode.DecodeFailure:
    case ErrorCode.InvalidConfig:
      return 400;
    case ErrorCode.UnknownContainer:
      return 404;
    case ErrorCode.AttachmentConflict:
    case ErrorCode.AttachmentGone:
      return 409;
    case ErrorCode.TryAgainLater:
    case ErrorCode.ShuttingDown:
    case ErrorCode.PluginNotAvailable:
    case ErrorCode.LimitedConnectivity:
      return 503;
    case ErrorCode.PluginTimeout:
      return 504;
    default:
      return 500;
  }
}

function requestCniVersion(body: unknown): string {
  const v = (body as { config?: { cniVersion?: unknown } } | undefined)?.config?.cniVersion;
  return typeof v === 'string' && v !== '' ? v : LATEST_VERSION;
}

/** The app with what every variant shares: limits, JSON parsing, query hygiene, the error handler. */
function baseApp(log: Logger) {
  const app = Fastify({
    loggerInstance: log,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: MAX_NETCONF_BYTES + 64 * 1024,
    return503OnClosing: true,
    // A netconf is plain JSON: a "__proto__" or "constructor" key is data (JSON.parse makes it an
    // own property, never the prototype), accepted and stored as given. Nothing here copies
    // request keys with assignment, which is where such a key would do harm.
    onProtoPoisoning: 'ignore',
    onConstructorPoisoning: 'ignore',
  });

  // Every query parameter is single-valued: ?containerId=a&containerId=b is a client error, said so.
  app.addHook('preValidation', async (request, reply) => {
    const q = request.query as Record<string, unknown> | undefined;
    if (!q || typeof q !== 'object') return;
    for (const [k, v] of Object.entries(q)) {
      if (Array.isArray(v)) {
        return reply
          .code(400)
          .type('application/json')
          .send({ error: `query parameter "${capText(k, 64)}" is given ${v.length} times; give it at most once` });
      }
    }
  });

  app.setErrorHandler((e, request, reply) => {
    const error = e as Error & { code?: string; statusCode?: number };
    let err: CniError;
    if (error instanceof CniError) {
      err = error;
    } else if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      err = new CniError(ErrorCode.InvalidConfig, `request body is larger than ${MAX_NETCONF_BYTES} bytes`);
    } else if (error.statusCode === 400 || error.code?.startsWith('FST_ERR_CTP')) {
      err = new CniError(ErrorCode.DecodeFailure, `cannot decode request: ${error.message}`);
    } else {
      request.log.error({ err: error }, 'unexpected error handling request');
      err = new CniError(ErrorCode.Internal, `internal error in stewardd: ${error.message}`);
    }
    const echoed = new CniError(
      err.code,
      capText(err.message, MAX_ECHO_MSG_BYTES),
      err.details === undefined ? undefined : capText(err.details, MAX_ECHO_DETAILS_BYTES),
    );
    void reply
      .code(httpStatusFor(err.code))
      .type('application/json')
      .send(echoed.toJSON(requestCniVersion(request.body)));
  });

  app.setNotFoundHandler((request, reply) => {
    void reply
      .code(404)
      .type('application/json')
      .send({ error: `no route ${request.method} ${capText(request.url, 256)}` });
  });

  return app;
}

export function buildApp(deps: AppDeps) {
  const app = baseApp(deps.log);
  void app.register(cniRoutes, deps);
  void app.register(statusRoutes, deps);
  return app;
}

/** The app of a daemon whose journal failed its start-up check (routes/degraded.ts). */
export function buildDegradedApp(deps: DegradedDeps & { log: Logger }) {
  const app = baseApp(deps.log);
  void app.register(degradedRoutes, deps);
  return app;
}
