// How a failed journal write reaches the request: a CniError whose code says whether retrying can
// help. The disk (full, I/O error, read-only, locked) is code 11, try again later; anything else
// (a constraint) is a bug, code 104. Nothing half-done is assumed committed either way.

import { CniError, ErrorCode, failureSafeText } from '@cni-steward/shared';

/** The CniError a failed write is answered with. */
export function writeError(err: Error & { code?: string }): CniError {
  const text = `${err.code ?? 'error'}: ${failureSafeText(err.message)}`;
  if (/^SQLITE_(FULL|IOERR|READONLY|BUSY|LOCKED|CANTOPEN|NOMEM|PROTOCOL)/.test(err.code ?? '')) {
    return new CniError(
      ErrorCode.TryAgainLater,
      `stewardd could not write its journal (${text}); nothing was left half-written, try again later`,
    );
  }
  return new CniError(ErrorCode.Internal, `stewardd journal write failed (${text})`);
}
