// How a failed journal write reaches the request: a CniError whose code says whether retrying can
// help. The disk (full, I/O error, read-only, locked) is code 11, try again later; anything else
// (a constraint) is a bug, code 104. Nothing half-done is assumed committed either way.

import { CniError, ErrorCode, failureSafeText } from '@cni-steward/shared';

/**
 * A journal write that failed: a CniError like any other to the request, and known as the journal's
 * own failure to whoever must tell it from a plugin's (a spooled DEL keeps its file: engine/spool.ts).
 */
export class JournalWriteError extends CniError {}

/** The CniError a failed write is answered with. */
export function writeError(err: Error & { code?: string }): JournalWriteError {
  const text = `${err.code ?? 'error'}: ${failureSafeText(err.message)}`;
  if (/^SQLITE_(FULL|IOERR|READONLY|BUSY|LOCKED|CANTOPEN|NOMEM|PROTOCOL)/.test(err.code ?? '')) {
    return new JournalWriteError(
      ErrorCode.TryAgainLater,
      `stewardd could not write its journal (${text}); nothing was left half-written, try again later`,
    );
  }
  return new JournalWriteError(ErrorCode.Internal, `stewardd journal write failed (${text})`);
}
