// Text that came from outside (a plugin's error, a pod's name, a runtime's name and version) made
// safe to print on an operator's terminal or log line: control characters, and the bidirectional
// overrides that reorder what a reader sees, shown as escapes (`\x1b`, `\u202e`), never raw.

// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

export function printable(s: string): string {
  return s.replace(UNPRINTABLE, (c) => {
    const n = c.charCodeAt(0);
    return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
  });
}

/** printable(s), at most `max` characters of it, saying how many were cut. */
export function printableCapped(s: string, max: number): string {
  const p = printable(s);
  return p.length <= max ? p : `${p.slice(0, max)}… [${p.length - max} more characters cut]`;
}
