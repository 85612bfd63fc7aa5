// The one CNI-code -> HTTP status table, and the error body every CNI answer uses (fastify's
// error handler and the admission path's early answers alike).

import type { ServerResponse } from 'node:http';
import { CniError, ErrorCode, LATEST_VERSION, MAX_VERSION_PART_DIGITS } from '@cni-steward/shared';
import { capText, MAX_ECHO_DETAILS_BYTES, MAX_ECHO_MSG_BYTES } from './echo.js';

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
    case ErrorCode.VersionSkew:
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

const VERSION_SHAPE = new RegExp(`^[0-9]{1,${MAX_VERSION_PART_DIGITS}}(\\.[0-9]{1,${MAX_VERSION_PART_DIGITS}}){2}$`);

/**
 * The cniVersion a request asked for (its netconf's), for the version of an error answer, when it
 * has a version's shape (MAX_VERSION_PART_DIGITS); otherwise the latest.
 */
export function requestCniVersion(body: unknown): string {
  const v = (body as { config?: { cniVersion?: unknown } } | undefined)?.config?.cniVersion;
  return typeof v === 'string' && VERSION_SHAPE.test(v) ? v : LATEST_VERSION;
}

/** Status and JSON body answering `err` to a request with this body (texts capped). */
export function cniErrorAnswer(err: CniError, body: unknown): { status: number; json: unknown } {
  const echoed = new CniError(
    err.code,
    capText(err.message, MAX_ECHO_MSG_BYTES),
    err.details === undefined ? undefined : capText(err.details, MAX_ECHO_DETAILS_BYTES),
  );
  return { status: httpStatusFor(err.code), json: echoed.toJSON(requestCniVersion(body)) };
}

/** Writes a whole JSON answer on a raw response (the admission path's answers, outside fastify). */
export function writeJsonAnswer(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** Answers `err` (capped, at the request's cniVersion: cniErrorAnswer) on a raw response. */
export function writeCniError(res: ServerResponse, err: CniError, body: unknown): void {
  const { status, json } = cniErrorAnswer(err, body);
  writeJsonAnswer(res, status, JSON.stringify(json));
}
