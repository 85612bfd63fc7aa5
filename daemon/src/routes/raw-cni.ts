// Serving one hinted CNI request from its raw body, as fastify's POST /v1/cni route would (the same
// serveCni, the same error answers) but without routing, hooks or a content-type parser: the shim's
// every request takes this path (routes/admission.ts decides when). test/integration/admission-attack.test.ts
// compares its answers with fastify's for what hostile and buggy clients send.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { CniError, ErrorCode } from '@cni-steward/shared';
import type { Hints } from './hints.js';
import { clientGone } from './client-gone.js';
import { writeCniError, writeJsonAnswer } from './http-status.js';
import { inRequestContext } from '../tracing/context.js';
import { parseWireJson } from '../faithful-json.js';

export interface RawCniOptions {
  maxBodyBytes: number;
  /** Serves a request body as POST /v1/cni does (routes/cni.ts serveCni). */
  serve(body: unknown, hints: Hints, clientGone: () => boolean): Promise<string>;
}

/** What fastify's JSON parser takes: the media type application/json, with or without parameters. */
export function isRawJson(req: IncomingMessage): boolean {
  return /^application\/json\s*(;|$)/i.test(req.headers['content-type'] ?? '');
}

/** Reads, decodes and serves the request, then answers it; `onServed` runs when it is answered 200. */
export function serveRawCni(
  req: IncomingMessage,
  res: ServerResponse,
  hints: Hints,
  o: RawCniOptions,
  onServed?: () => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  const tooLarge = () => new CniError(ErrorCode.InvalidConfig, `request body is larger than ${o.maxBodyBytes} bytes`);
  const onData = (b: Buffer) => {
    size += b.length;
    if (size <= o.maxBodyBytes) return chunks.push(b);
    // Refused; the rest of the body is still read and dropped: a client still writing when the
    // connection closed would get EPIPE and never read the answer (the shim would report the daemon
    // unreachable, and spool a DEL). A keep-alive connection stays open after the answer (node:http
    // drops the rest), so it is answered at once; one closed after it (the shim's Connection:
    // close) only once the whole body is in.
    req.off('data', onData);
    req.off('end', onEnd);
    if (!res.shouldKeepAlive) {
      req.on('data', () => undefined);
      return void req.once('end', () => fail(tooLarge()));
    }
    fail(tooLarge());
  };
  let body: unknown;
  const answered = () => res.writableEnded || res.destroyed;
  const fail = (e: unknown) => {
    if (!answered()) writeCniError(res, CniError.from(e), body);
  };
  const onEnd = () => {
    try {
      const text = Buffer.concat(chunks).toString('utf8');
      body = parseWireJson(text);
    } catch (e) {
      return fail(new CniError(ErrorCode.DecodeFailure, `cannot decode request: ${(e as Error).message}`));
    }
    // In the trace context the request arrived with (tracing/context.ts), whichever callback admitted it.
    inRequestContext(req, () => o.serve(body, hints, () => clientGone(req, res))).then((text) => {
      onServed?.();
      if (!answered()) writeJsonAnswer(res, 200, text);
    }, fail);
  };
  req.on('data', onData);
  req.once('error', () => res.destroy());
  req.once('end', onEnd);
}
