// POST /v1/cni: the shim's one request. Decodes the envelope with the shared contract's decoder,
// hands it to the engine, and answers 200 with the text to print or a CNI error.

import type { FastifyInstance } from 'fastify';
import { CNI_ROUTE, CniError, ErrorCode, decodeWireRequest, podFromCniArgs, podLogFields } from '@cni-steward/shared';
import type { AppDeps } from './deps.js';

export async function cniRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.post(CNI_ROUTE, async (request, reply) => {
    const req = decodeWireRequest(request.body);
    // While shutting down (the SIGTERM drain can take a while) DELs are still served: the shim
    // spools only when the daemon is unreachable, so a refused DEL would simply fail.
    if (req.env.command !== 'DEL' && !deps.isServing()) {
      throw new CniError(ErrorCode.TryAgainLater, 'stewardd is shutting down; try again later');
    }
    const command = req.env.command;
    const stop = deps.metrics.requestSeconds.startTimer({ command });
    try {
      const text = await deps.engine.handle(req);
      deps.metrics.requests.inc({ command, code: '0' });
      return reply.code(200).type('application/json').send(text);
    } catch (e) {
      const err = CniError.from(e);
      deps.metrics.requests.inc({ command, code: String(err.code) });
      request.log.warn(
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
  });
}
