// POST /v1/cni: the shim's one request. Decodes the envelope with the shared contract's decoder,
// checks it against the request's admission hints (routes/hints.ts), hands it to the engine, and
// answers 200 with the text to print or a CNI error. serveCni is shared with the admission path
// (routes/admission.ts), which answers DELs of torn-down attachments without going through fastify.

import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import {
  CNI_COMMANDS,
  CNI_ROUTE,
  CniError,
  ErrorCode,
  decodeWireRequest,
  podFromCniArgs,
  podLogFields,
  type CniRequestBody,
} from '@cni-steward/shared';
import type { AppDeps } from './deps.js';
import { clientGone } from './client-gone.js';
import { assertExactCniTarget } from './cni-route.js';
import { checkHints, hintValues, readHints, type Hints } from './hints.js';
import { inRequestContext } from '../tracing/context.js';

/**
 * Serves one request body; resolves with the text to print, rejects with a CniError. While traces
 * are exported, within the request's span (`cni ADD`, …; tracing/tracing.ts), in the context it arrived with.
 */
export function serveCni(
  deps: AppDeps,
  body: unknown,
  hints: Hints | undefined,
  log: Pick<FastifyBaseLogger, 'warn'>,
  clientGone?: () => boolean,
): Promise<string> {
  const tracing = deps.tracing;
  if (tracing === undefined || !tracing.recording) return answerCni(deps, body, hints, log, clientGone);
  return tracing.request(hints?.command, (describe) => answerCni(deps, body, hints, log, clientGone, describe));
}

/** A request whose body did not decode: the shim's command hint if it is a CNI command (a bounded label). */
function commandLabel(hints: Hints | undefined): string {
  return (CNI_COMMANDS as readonly string[]).includes(hints?.command ?? '') ? hints!.command : 'invalid';
}

/**
 * The requests refused for stewardd's own state. While shutting down (the SIGTERM drain can take a
 * while) DELs are still served: the shim spools only when the daemon is unreachable, so a refused
 * DEL would simply fail.
 */
function refuseUnserved(deps: AppDeps, req: CniRequestBody): void {
  if (req.env.command !== 'DEL' && !deps.isServing()) {
    const msg = 'stewardd is shutting down; try again later';
    if (req.env.command === 'STATUS') deps.statusNotReady?.record('shutting down', msg);
    throw new CniError(ErrorCode.TryAgainLater, msg);
  }
  if (req.env.command === 'STATUS' && !deps.isReady()) {
    const msg = 'stewardd is not ready (see /readyz)';
    deps.statusNotReady?.record('not ready', msg);
    throw new CniError(ErrorCode.PluginNotAvailable, msg);
  }
}

async function answerCni(
  deps: AppDeps,
  body: unknown,
  hints: Hints | undefined,
  log: Pick<FastifyBaseLogger, 'warn'>,
  clientGone?: () => boolean,
  describe?: (req: CniRequestBody) => void,
): Promise<string> {
  let req: CniRequestBody | undefined;
  try {
    req = decodeWireRequest(body);
    describe?.(req);
    if (hints) checkHints(hints, req);
    refuseUnserved(deps, req);
  } catch (e) {
    // Counted too: the ADD error-rate alert and a STATUS answered "not ready" must see these.
    const code = CniError.from(e).code; // what the answer will carry; `e` itself goes on, as it was
    deps.metrics.requests.inc({ command: req?.env.command ?? commandLabel(hints), code: String(code) });
    throw e;
  }
  const command = req.env.command;
  const stop = deps.metrics.requestSeconds.startTimer({ command });
  // A STATUS's verdict is published whether or not its shim still waits (it may have answered from
  // the beacon): the next STATUS of that network reads it.
  const verdict =
    command === 'STATUS'
      ? (passed: boolean) => {
          deps.aliveBeacon?.noteStatus(hints?.statusKey, passed);
          if (clientGone?.()) deps.metrics.statusAfterShimLeft.inc();
        }
      : undefined;
  try {
    const text = await deps.engine.handle(req, clientGone);
    deps.metrics.requests.inc({ command, code: '0' });
    verdict?.(true);
    return text;
  } catch (e) {
    const err = CniError.from(e);
    verdict?.(false);
    deps.metrics.requests.inc({ command, code: String(err.code) });
    log.warn(
      {
        containerId: req.env.containerId,
        ...podLogFields(podFromCniArgs(req.env.args)),
        command,
        code: err.code,
        err: err.message,
      },
      'CNI request failed',
    );
    throw err;
  } finally {
    stop();
  }
}

export async function cniRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.post(CNI_ROUTE, async (request, reply) => {
    assertExactCniTarget(request.raw.url ?? '');
    const text = await inRequestContext(request.raw, () =>
      serveCni(deps, request.body, readHints(hintValues(request.raw.rawHeaders)), request.log, () =>
        clientGone(request.raw, reply.raw),
      ),
    );
    return reply.code(200).type('application/json').send(text);
  });
}
