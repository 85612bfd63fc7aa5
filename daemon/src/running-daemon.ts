// The handle `stewardd run` gets back from either way of starting: the full daemon (daemon.ts) or
// the degraded one serving a journal that failed its check (degraded.ts).

export interface RunningDaemon {
  close(reason: string): Promise<void>;
  closed: Promise<void>;
}
