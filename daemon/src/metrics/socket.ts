// The CNI socket's metrics: relistens after its file was deleted or replaced (self-check.ts), and
// connections closed at once for want of file descriptors (socket.ts ConnectionGuard).

import { Counter, type Registry } from 'prom-client';

export class SocketMetrics {
  readonly relistens: Counter<'why'>;
  readonly connectionsRefused: Counter<'why'>;

  constructor(registry: Registry) {
    this.relistens = new Counter({
      name: 'steward_socket_relistens_total',
      help: 'Times stewardd listened on its socket path again after finding the socket file deleted or replaced',
      labelNames: ['why'] as const,
      registers: [registry],
    });
    this.connectionsRefused = new Counter({
      name: 'steward_connections_refused_total',
      help: 'Connections to the CNI socket closed at once for want of file descriptors: past the cap kept below RLIMIT_NOFILE (fd_cap), or accept(2) failing (EMFILE, ENFILE)',
      labelNames: ['why'] as const,
      registers: [registry],
    });
    // Series that exist from the first scrape, so an alert's increase() sees the first refusal.
    for (const why of ['fd_cap', 'EMFILE', 'ENFILE']) this.connectionsRefused.inc({ why }, 0);
  }
}
