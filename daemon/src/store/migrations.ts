// Schema migrations, applied in order at open. PRAGMA user_version holds the number applied.
// Never edit a released migration: append a new one.

export const MIGRATIONS: readonly string[] = [
  // 1: attachments (one per runtime (container, network, ifname) ADD) and their steps
  // (one per delegate plugin executed), journaled before each plugin runs.
  `
  CREATE TABLE attachments (
    id           INTEGER PRIMARY KEY,
    container_id TEXT NOT NULL,
    network      TEXT NOT NULL,
    ifname       TEXT NOT NULL,
    netns        TEXT NOT NULL,
    cni_args     TEXT NOT NULL,
    cni_path     TEXT NOT NULL,
    cni_version  TEXT NOT NULL,
    boot_id      TEXT NOT NULL,
    state        TEXT NOT NULL,
    config       TEXT NOT NULL,
    result       TEXT,
    error        TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
  );
  CREATE INDEX attachments_by_key ON attachments (container_id, network, ifname);
  CREATE INDEX attachments_by_state ON attachments (state);

  CREATE TABLE steps (
    id              INTEGER PRIMARY KEY,
    attachment_id   INTEGER NOT NULL REFERENCES attachments (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    delegate_index  INTEGER NOT NULL,
    delegate_name   TEXT NOT NULL,
    ifname          TEXT NOT NULL,
    plugin_index    INTEGER NOT NULL,
    plugin_type     TEXT NOT NULL,
    config          TEXT NOT NULL,
    state           TEXT NOT NULL,
    result          TEXT,
    error           TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    teardown_at     INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (attachment_id, seq)
  );
  CREATE INDEX steps_by_state ON steps (state);
  `,
  // 2: the Kubernetes pod of each attachment, from K8S_POD_* in CNI_ARGS (null when the runtime
  // names none, and for rows written before this migration), and an index for the pod filter.
  `
  ALTER TABLE attachments ADD COLUMN pod_namespace TEXT;
  ALTER TABLE attachments ADD COLUMN pod_name TEXT;
  ALTER TABLE attachments ADD COLUMN pod_uid TEXT;
  CREATE INDEX attachments_by_pod ON attachments (pod_namespace, pod_name);
  `,
  // 3: the process of the plugin a step last started (its pid, which is its process group id, the
  // start time from /proc/PID/stat, the kernel boot id and the PID namespace, which together
  // cannot name a reused pid), so that recovery can kill a plugin the dead daemon left running
  // before it rolls the step back. Null for steps whose plugin never started, and for rows older
  // than this migration.
  `
  ALTER TABLE steps ADD COLUMN plugin_pid INTEGER;
  ALTER TABLE steps ADD COLUMN plugin_start INTEGER;
  ALTER TABLE steps ADD COLUMN plugin_boot TEXT;
  ALTER TABLE steps ADD COLUMN plugin_pidns TEXT;
  `,
  // 4: how long a step has been pending teardown while a daemon ran (ms, accumulated on the
  // monotonic clock at each failed DEL). The retry bound's max age counts this, not the wall-clock
  // age since teardown_at, which a clock step forward would inflate (issue 19 item 4). 0 for rows
  // older than this migration: their age counts from the first DEL after it.
  `
  ALTER TABLE steps ADD COLUMN pending_ms INTEGER NOT NULL DEFAULT 0;
  `,
  // 5: when the audit first found each finding orphaned (audit/decide.ts findingKey: kind, path,
  // container id), so that a release on the runtime's word alone needs passes at least the grace
  // apart to agree, across restarts too. Rewritten whole by every pass whose runtime answer is trusted.
  `
  CREATE TABLE audit_sightings (
    key        TEXT PRIMARY KEY,
    first_seen INTEGER NOT NULL
  ) WITHOUT ROWID;
  `,
  // 6: which namespace the ADD's netns path named (engine/netns.ts netnsIdentity), so that a
  // teardown passes the path only while it still names that one: a pid reused, or a bind mount made
  // again under the same name for another pod, had a DEL remove that pod's interface. Null for
  // tombstones, and for rows older than this migration (their teardown checks the path as before).
  `
  ALTER TABLE attachments ADD COLUMN netns_id TEXT;
  `,
];
