// The query parameters each operator route takes (server.ts answers any other 400, naming it). One
// list for the healthy daemon's routes (status.ts, audit.ts) and the degraded daemon's (degraded.ts),
// which answer the same paths: `?container=` for `?containerId=` is the same mistake on either.

export const QUERY_KEYS = {
  status: [],
  healthz: [],
  readyz: [],
  attachments: ['containerId', 'state', 'pod', 'limit'],
  teardowns: [],
  retry: ['abandoned'],
  auditGet: ['runtimeEndpoint', 'deadline'],
  auditPost: ['release', 'grace', 'cap', 'capFraction', 'deadline', 'runtimeEndpoint'],
} as const satisfies Record<string, readonly string[]>;
