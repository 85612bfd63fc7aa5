// The one matcher of the CNI route (issue 28 item 4). The protocol check (routes/protocol.ts) and
// the DEL admission caps (routes/admission.ts) are decided on the request target as node:http gives
// it, before fastify routes it; fastify's router (find-my-way) then maps more than one target to the
// same route: it drops a query string and a fragment, percent-decodes the path and takes the
// absolute form (`http://host/v1/cni`). Each of those reached the CNI handler with no protocol check
// and no cap. So the CNI route is the exact target `/v1/cni` and nothing else: any other target that
// names it is refused with a CNI error before its body is read, here for the raw path, and again by
// the route's own handler (assertExactCniTarget) for whatever the router maps there that this
// normalisation would not catch.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { CNI_ROUTE, CniError, ErrorCode } from '@cni-steward/shared';
import { capText } from './echo.js';
import { writeCniError } from './http-status.js';

export type CniTarget = 'exact' | 'variant' | 'other';

/**
 * Whether a request target is the CNI route exactly, another spelling of it, or another route. The
 * spelling is judged more loosely than fastify's router: scheme and authority, query, fragment and
 * `;` parameters dropped, percent-decoding, repeated and trailing slashes and case ignored, so that
 * nothing the router (in any of its options) maps to the route passes as another route.
 */
export function cniTarget(url: string | undefined): CniTarget {
  if (url === CNI_ROUTE) return 'exact';
  if (url === undefined) return 'other';
  let path = url.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '');
  const cut = path.search(/[?#;]/);
  if (cut >= 0) path = path.slice(0, cut);
  for (let i = 0; i < 3 && path.includes('%'); i++) {
    try {
      path = decodeURIComponent(path);
    } catch {
      break;
    }
  }
  path = path
    .replace(/\/{2,}/g, '/')
    .replace(/(.)\/+$/, '$1')
    .toLowerCase();
  return path === CNI_ROUTE ? 'variant' : 'other';
}

/** A request's CNI target: its target's (cniTarget) when it is a POST, `other` for any other method. */
export function cniRequestTarget(req: IncomingMessage): CniTarget {
  return req.method === 'POST' ? cniTarget(req.url) : 'other';
}

function refusal(url: string | undefined): CniError {
  return new CniError(
    ErrorCode.DecodeFailure,
    `the CNI route is exactly POST ${CNI_ROUTE}; request target ${JSON.stringify(capText(url ?? '', 256))} is refused (no query, fragment, percent-encoding, absolute form or extra slashes)`,
  );
}

/** Refuses (answers 400 + code 6, body unread) a request to another spelling of the CNI route; true when it did. */
export function refuseCniVariant(req: IncomingMessage, res: ServerResponse): boolean {
  if (cniTarget(req.url) !== 'variant') return false;
  req.resume();
  writeCniError(res, refusal(req.url), undefined);
  return true;
}

/** For the route's handler: throws the same refusal for any target but the exact one. */
export function assertExactCniTarget(url: string): void {
  if (url !== CNI_ROUTE) throw refusal(url);
}
