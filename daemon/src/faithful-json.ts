// Parsing JSON that is passed on to a plugin, so that its numbers reach the plugin as written. A
// JavaScript number is a double: JSON.parse makes 9007199254740993 into ...992 and 1e400 into
// Infinity, which JSON.stringify writes as null. A Go plugin reading the same netconf directly
// would get the exact int64 or refuse the overflow; through stewardd it would get another value,
// or a silent zero. Such a number is kept as its source text (JSON.rawJSON, which JSON.stringify
// writes back verbatim); every other number stays a number, the same double a plugin's float64
// reads (1.0 is written back as 1). stewardd's own keys ("timeouts") take only safe integers, so a
// kept number there is refused or ignored as any other non-number would be.

/** JSON.parse's reviver context (TC39 "JSON.parse source text access", V8 11.4, Node 21+). */
interface ReviverContext {
  source?: string;
}

type RawJsonFactory = (text: string) => unknown;

// Not in TypeScript's lib yet; Node 24 (the one stewardd runs on) has both.
const rawJSON = (JSON as unknown as { rawJSON: RawJsonFactory }).rawJSON;

/**
 * Whether a number read from `source` would be written back as another value: past the double's
 * range (Infinity), an integer past 2^53 rounded, or a nonzero number too small for a double (0).
 */
function changes(value: number, source: string): boolean {
  if (!Number.isFinite(value)) return true;
  if (value === 0) return /[1-9]/.test(source.replace(/[eE].*$/, ''));
  return Number.isInteger(value) && !Number.isSafeInteger(value) && JSON.stringify(value) !== source;
}

function keepNumbers(this: unknown, _key: string, value: unknown, context?: ReviverContext): unknown {
  if (typeof value === 'number' && context?.source !== undefined && changes(value, context.source))
    return rawJSON(context.source);
  return value;
}

/** Whether any number in `value` might have been changed by parsing (walked without recursion). */
function mayHaveChanged(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'number') {
      if (v === 0 || (!Number.isSafeInteger(v) && (Number.isInteger(v) || !Number.isFinite(v)))) return true;
    } else if (v !== null && typeof v === 'object') {
      for (const c of Object.values(v)) stack.push(c);
    }
  }
  return false;
}

/** Deepest nesting parsed again with the reviver: V8 revives recursively (100,000 levels overflowed). */
const MAX_REVIVED_DEPTH = 1000;

function nestsDeeper(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= max) return true;
    for (const c of Object.values(v)) stack.push([c, depth + 1]);
  }
  return false;
}

/**
 * JSON.parse, except that a number a double cannot hold (see `changes`) is kept as its source
 * text. Throws what JSON.parse throws. Parsed once without a reviver; again with it only when a
 * number may have changed, and the value nests no deeper than MAX_REVIVED_DEPTH (one deeper is
 * refused by its reader: a netconf past 100 levels is code 7, shared/src/wire.ts).
 */
export function parseJson(text: string): unknown {
  const plain: unknown = JSON.parse(text);
  if (!mayHaveChanged(plain) || nestsDeeper(plain, MAX_REVIVED_DEPTH)) return plain;
  return JSON.parse(text, keepNumbers as (this: unknown, key: string, value: unknown) => unknown);
}

/** Whether `value` is a number parseJson kept as its source text. */
export function isKeptNumber(value: unknown): boolean {
  return (JSON as unknown as { isRawJSON(v: unknown): boolean }).isRawJSON(value);
}
