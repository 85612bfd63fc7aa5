// Start-up and open errors that name the path and the cause. SQLite and node:fs say "attempt to
// write a readonly database" or "EACCES" without saying which file; an operator needs both.

/** An Error naming what was being done, the path and the driver's cause; `code` is kept. */
export class PathError extends Error {
  readonly code: string | undefined;
  constructor(what: string, path: string, cause: unknown) {
    const c = cause as { message?: unknown; code?: unknown };
    const msg = typeof c?.message === 'string' ? c.message : String(cause);
    const code = typeof c?.code === 'string' ? c.code : undefined;
    super(`cannot ${what} ${path}: ${msg}${hint(code, msg)}`, { cause });
    this.name = 'PathError';
    this.code = code;
  }
}

function hint(code: string | undefined, msg: string): string {
  if (code === 'SQLITE_READONLY' || /readonly|read-only|EROFS/i.test(msg) || code === 'EROFS')
    return ' (the file or its directory is read-only: stewardd must be able to write it)';
  if (code === 'EACCES' || code === 'EPERM' || code === 'SQLITE_CANTOPEN')
    return ' (check that the directory exists and that stewardd may write it)';
  return '';
}

/**
 * Runs `fn`; an error from it becomes a PathError unless it already names `path` (node:fs errors
 * do), which then only gets the hint it lacks, its code and stack kept.
 */
export function namingPath<T>(what: string, path: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (!(e instanceof Error) || !e.message.includes(path)) throw new PathError(what, path, e);
    const code = (e as { code?: unknown }).code;
    e.message += hint(typeof code === 'string' ? code : undefined, e.message);
    throw e;
  }
}
