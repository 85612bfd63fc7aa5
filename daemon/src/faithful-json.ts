// Parsing JSON that is passed on to a plugin, so that its numbers reach the plugin as written. A
// JavaScript number is a double: JSON.parse makes 9007199254740993 into ...992 and 1e400 into
// Infinity, which JSON.stringify writes as null. A Go plugin reading the same netconf directly
// would get the exact int64 or refuse the overflow; through stewardd it would get another value,
// or a silent zero. Such a number is kept as its source text (JSON.rawJSON, which JSON.stringify
// writes back verbatim); every other number stays a number, the same double a plugin's float64
// reads (1.0 is written back as 1).

/** JSON.parse's reviver context (TC39 "JSON.parse source text access", V8 11.4, Node 21+). */
interface ReviverContext {
  source?: string;
}

// Not in TypeScript's lib yet; Node 24 (the one stewardd runs on) has both.
const json = JSON as unknown as { rawJSON(text: string): unknown; isRawJSON(value: unknown): boolean };

/**
 * The largest text parsed again with the reviver. V8 calls it for every value (about 0.8 µs each,
 * on the event loop): a 1 MiB body of numbers would hold the loop for half a second, this size for
 * about 22 ms (docs/errors.md). A netconf is a few KiB; in a larger text numbers are read
 * as doubles.
 */
export const MAX_REVIVED_BYTES = 64 * 1024;

/** Deepest nesting parsed again with the reviver: V8 revives recursively (100,000 levels overflowed). */
const MAX_REVIVED_DEPTH = 1000;

/**
 * Whether the text may hold a number JSON.stringify would not write back as read: one with 16
 * digits or more in a row (integers from 2^53 on have 16; a long run of zeros underflows), an
 * exponent, or a negative zero. Strings match too (a container id); that only costs the check below.
 */
const MAY_CHANGE = /\d{16}|\d[eE]|-0/;

/** A zero can be a nonzero number too small for a double only if written with a negative exponent or many zeros. */
const MAY_UNDERFLOW = /\d[eE]-|0{16}/;

/**
 * Whether a number read from `source` would be written back as another value: past the double's
 * range (Infinity), an integer past 2^53 rounded, a nonzero number too small for a double (0), or
 * a negative zero (JSON.stringify writes -0 as 0; Go's float64 reads "-0" as -0).
 */
function changes(value: number, source: string): boolean {
  if (!Number.isFinite(value)) return true;
  if (value === 0) return source.startsWith('-') || /[1-9]/.test(source.replace(/[eE].*$/, ''));
  return Number.isInteger(value) && !Number.isSafeInteger(value) && JSON.stringify(value) !== source;
}

function keepNumbers(this: unknown, _key: string, value: unknown, context?: ReviverContext): unknown {
  if (typeof value === 'number' && context?.source !== undefined && changes(value, context.source))
    return json.rawJSON(context.source);
  return value;
}

/**
 * Whether parsing may have changed a number of `value` (walked without recursion), and how deep it
 * nests: undefined when it nests deeper than `maxDepth`. (shared/src/wire.ts nestsDeeperThan walks
 * the same way, but objects only, and a second walk would double the cost.)
 */
function mayHaveChanged(value: unknown, zeros: boolean, maxDepth: number): boolean | undefined {
  let found = false;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v === 'number') {
      if (
        (v === 0 && (zeros || Object.is(v, -0))) ||
        (!Number.isSafeInteger(v) && (Number.isInteger(v) || !Number.isFinite(v)))
      )
        found = true;
    } else if (v !== null && typeof v === 'object') {
      if (depth >= maxDepth) return undefined;
      for (const c of Object.values(v)) stack.push([c, depth + 1]);
    }
  }
  return found;
}

/**
 * JSON.parse, except that a number a double cannot hold (see `changes`) is kept as its source
 * text. Throws what JSON.parse throws. Parsed once without a reviver; again with it only when a
 * number may have changed, in a text of at most MAX_REVIVED_BYTES nesting at most
 * MAX_REVIVED_DEPTH levels (one deeper is refused by its reader: a netconf past 100 levels is code
 * 7, shared/src/wire.ts).
 */
export function parseJson(text: string): unknown {
  const plain: unknown = JSON.parse(text);
  if (text.length > MAX_REVIVED_BYTES || !MAY_CHANGE.test(text)) return plain;
  if (mayHaveChanged(plain, MAY_UNDERFLOW.test(text), MAX_REVIVED_DEPTH) !== true) return plain;
  return JSON.parse(text, keepNumbers as (this: unknown, key: string, value: unknown) => unknown);
}

/** Whether `value` is a number parseJson kept as its source text. */
export function isKeptNumber(value: unknown): boolean {
  return json.isRawJSON(value);
}

/** A kept number back as the double JSON.parse reads from its text. */
function asDouble(kept: unknown): number {
  return Number((kept as { rawJSON: string }).rawJSON);
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && !isKeptNumber(v);

/** Where a request body holds what stewardd checks is an object: its env and config, and config's own objects. */
const WIRE_OBJECTS: ReadonlyArray<readonly [...string[], string]> = [
  ['env'],
  ['config'],
  ['config', 'timeouts'],
  ['config', 'runtimeConfig'],
];

/**
 * A request body (api.ts CniWireRequest) parsed as parseJson does, except where stewardd expects
 * an object (the body itself too): a number there is the double JSON.parse reads, and is refused
 * as any number there is. A kept number is an object to `typeof`, and would pass for one. A
 * leading byte-order mark is skipped, as fastify's JSON parser does.
 */
export function parseWireJson(text: string): unknown {
  const body = parseJson(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  if (isKeptNumber(body)) return asDouble(body);
  for (const path of WIRE_OBJECTS) {
    let holder: unknown = body;
    for (const k of path.slice(0, -1)) holder = isObject(holder) ? holder[k] : undefined;
    const last = path[path.length - 1] as string;
    if (isObject(holder) && isKeptNumber(holder[last])) holder[last] = asDouble(holder[last]);
  }
  return body;
}
