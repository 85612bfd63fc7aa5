// The shape of each stewardd answer a CLI command reads: one that does not match is not stewardd's
// (another program on the socket, another version), refused with exit 4 before anything reads it.

export const isObject = (j: unknown): j is Record<string, unknown> =>
  typeof j === 'object' && j !== null && !Array.isArray(j);
const numbers = (j: unknown, keys: string[]) => isObject(j) && keys.every((k) => typeof j[k] === 'number');

/** GET /v1/status: the healthy daemon's (what formatStatus reads) or the degraded one's (its reason). */
export const isStatusAnswer = (j: unknown) =>
  isObject(j) &&
  typeof j.ready === 'boolean' &&
  typeof j.version === 'string' &&
  (typeof j.reason === 'string' ||
    (numbers(j, ['uptimeSeconds']) &&
      isObject(j.steps) &&
      // What `status --check` decides on: a "5" would be exit 1 (abandoned steps) on a stranger's word.
      ['undefined', 'number'].includes(typeof j.steps.abandoned) &&
      isObject(j.attachments) &&
      isObject(j.teardownQueue) &&
      numbers(j.executions, ['slots', 'inUse', 'queued']) &&
      Array.isArray(j.lastErrors)));
export const isTeardownsAnswer = (j: unknown) =>
  isObject(j) &&
  Array.isArray(j.pending) &&
  Array.isArray(j.abandoned) &&
  [...j.pending, ...j.abandoned].every(isObject);
export const isRetryAnswer = (j: unknown) =>
  isObject(j) &&
  numbers(j, ['attempted', 'done', 'pending']) &&
  ['abandoned', 'stepsAbandoned', 'rearmed', 'skippedNewer'].every((k) =>
    ['undefined', 'number'].includes(typeof j[k]),
  );
export const isAuditAnswer = (j: unknown) =>
  isObject(j) && Array.isArray(j.orphans) && isObject(j.runtime) && typeof j.runtime.reachable === 'boolean';
