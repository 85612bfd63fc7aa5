// Capping text the daemon echoes back (HTTP error bodies, /v1/status lastErrors, /v1/teardowns,
// /v1/attachments errors): a plugin's error can quote its whole input (a 100 KB CNI_ARGS), and a
// status page or an error answer must stay small. The journal keeps what it keeps; only the echo
// is cut, at a UTF-8 character boundary, with a marker saying how much was left out.

export const MAX_ECHO_MSG_BYTES = 1024;
export const MAX_ECHO_DETAILS_BYTES = 4096;

/** `text` if it fits in `max` bytes of UTF-8, else its head and "… [cut N bytes]". */
export function capText(text: string, max: number): string {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= max) return text;
  let end = max;
  // Back off to the start of a character (continuation bytes are 10xxxxxx).
  while (end > 0 && ((buf[end] ?? 0) & 0xc0) === 0x80) end--;
  return `${buf.subarray(0, end).toString('utf8')}… [cut ${buf.length - end} bytes]`;
}

export function capNullable(text: string | null, max: number = MAX_ECHO_MSG_BYTES): string | null {
  return text === null ? null : capText(text, max);
}
