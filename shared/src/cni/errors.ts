// The one error type that crosses every boundary: shim <-> daemon <-> delegate plugin.
// It carries the CNI spec's error code so callers match on `code`, never on class or text.

/** Error codes from the CNI spec (SPEC.md, "Error"), plus the project's own (>= 100, docs/errors.md). */
export const ErrorCode = {
  IncompatibleVersion: 1,
  UnsupportedField: 2,
  UnknownContainer: 3,
  InvalidEnv: 4,
  IoFailure: 5,
  DecodeFailure: 6,
  InvalidConfig: 7,
  TryAgainLater: 11,
  PluginNotAvailable: 50,
  LimitedConnectivity: 51,
  // Project codes.
  PluginExecFailed: 100,
  PluginTimeout: 101,
  AttachmentConflict: 102,
  ShuttingDown: 103,
  Internal: 104,
  TeardownPending: 105,
  AttachmentGone: 106,
  CheckUnverifiable: 107,
  VersionSkew: 108,
} as const;

export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

/** The CNI error object as printed on stdout. */
export interface CniErrorJson {
  cniVersion: string;
  code: number;
  msg: string;
  details?: string;
}

export class CniError extends Error {
  readonly code: number;
  readonly details: string | undefined;

  constructor(code: number, msg: string, details?: string) {
    super(msg);
    this.name = 'CniError';
    this.code = code;
    this.details = details;
  }

  toJSON(cniVersion: string): CniErrorJson {
    const out: CniErrorJson = { cniVersion, code: this.code, msg: this.message };
    if (this.details !== undefined && this.details !== '') out.details = this.details;
    return out;
  }

  /**
   * Accepts a decoded CNI error object (from a plugin or the daemon); anything else yields undefined.
   * Its code must be a whole number from 1 up (the spec's codes, or a plugin's own from 100): a
   * plugin printing 0, -3.5 or 1e400 (which JSON would print back as null) printed no CNI error.
   */
  static fromJSON(value: unknown): CniError | undefined {
    if (typeof value !== 'object' || value === null) return undefined;
    const v = value as Record<string, unknown>;
    if (typeof v.code !== 'number' || !Number.isSafeInteger(v.code) || v.code < 1 || typeof v.msg !== 'string')
      return undefined;
    return new CniError(v.code, v.msg, typeof v.details === 'string' ? v.details : undefined);
  }

  /** Don't wrap an Error in an Error: a CniError passes through, anything else becomes `fallbackCode`. */
  static from(err: unknown, fallbackCode: number = ErrorCode.Internal): CniError {
    if (err instanceof CniError) return err;
    if (err instanceof Error) return new CniError(fallbackCode, err.message);
    return new CniError(fallbackCode, String(err));
  }
}

/**
 * `text` cut to at most `max` characters, saying how much was cut. Input echoed back in an error
 * (a 100 KB CNI_ARGS, a plugin message quoting it) must not make every status page that large.
 */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}… [${text.length - max} more characters cut]`;
}

/**
 * containerd's go-cni (and others) treat a DEL error whose text contains "not found" or
 * "no such file or directory" as success. An error meant as a failure must never contain them.
 */
export function failureSafeText(text: string): string {
  return text.replace(/not found/gi, 'not-found').replace(/no such file or directory/gi, 'ENOENT');
}

/** The end of the message of a plugin failure that printed no CNI error (plugins/executor.ts). */
export const UNCODED_FAILURE_SUFFIX = 'without a CNI error';

/** A plugin that exited non-zero (or was killed) without printing a CNI error on stdout. */
export function isUncodedPluginFailure(err: CniError): boolean {
  return err.code === ErrorCode.PluginExecFailed && err.message.endsWith(UNCODED_FAILURE_SUFFIX);
}
