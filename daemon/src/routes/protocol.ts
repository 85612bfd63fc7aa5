// Shim <-> daemon protocol version (shared/src/api.ts PROTOCOL_HEADER): every answer on the socket
// names the daemon's version, and a shim request in a version this daemon does not speak is refused
// with code 108 before its body is read, so a shim from another release never gets a wrong result.

import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  ACCEPTED_PROTOCOLS,
  CniError,
  ErrorCode,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  SKEW_ADVICE,
  UNVERSIONED_PROTOCOL,
} from '@cni-steward/shared';
import { writeCniError } from './http-status.js';

/**
 * The version a request speaks: its header's, UNVERSIONED_PROTOCOL for a shim request (it carries
 * hints) without one, undefined for a request that is no shim's (served as before).
 */
export function requestProtocol(req: IncomingMessage, hinted: boolean): string | undefined {
  const v = req.headers[PROTOCOL_HEADER];
  if (typeof v === 'string') return v.trim();
  if (Array.isArray(v)) return v.join(',');
  return hinted ? String(UNVERSIONED_PROTOCOL) : undefined;
}

/**
 * The 108 refusal of a request whose version is not accepted, with the version as shown (a number,
 * or "unknown"); undefined when it is accepted. The healthy daemon's admission and the degraded
 * daemon's route both refuse with it.
 */
export function skewError(req: IncomingMessage, hinted: boolean): { shown: string; error: CniError } | undefined {
  const v = requestProtocol(req, hinted);
  if (v === undefined || ACCEPTED_PROTOCOLS.some((a) => String(a) === v)) return undefined;
  const shown = /^[0-9]{1,6}$/.test(v) ? v : 'unknown';
  const before = v === String(UNVERSIONED_PROTOCOL) && req.headers[PROTOCOL_HEADER] === undefined;
  const error = new CniError(
    ErrorCode.VersionSkew,
    `version skew: the shim speaks protocol ${shown}${before ? ' (a release before protocol versions)' : ''}, stewardd speaks protocol ${PROTOCOL_VERSION} (accepts ${ACCEPTED_PROTOCOLS.join(', ')}); ${SKEW_ADVICE}`,
  );
  return { shown, error };
}

/**
 * Stamps the daemon's version on the answer; refuses (answers 409 + code 108 and returns false) a
 * request whose version is not accepted. `onSkew` is told the refused version (a metric).
 */
export function admitProtocol(
  req: IncomingMessage,
  res: ServerResponse,
  hinted: boolean,
  onSkew?: (shimProtocol: string) => void,
): boolean {
  res.setHeader(PROTOCOL_HEADER, String(PROTOCOL_VERSION));
  const skew = skewError(req, hinted);
  if (skew === undefined) return true;
  onSkew?.(skew.shown);
  // The body is not read: drop it, then answer (the shim writes it all before reading).
  req.resume();
  writeCniError(res, skew.error, undefined);
  return false;
}
