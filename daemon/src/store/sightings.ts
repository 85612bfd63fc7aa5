// The audit's sightings (migration 5): when each finding was first found orphaned. Kept apart from
// the journal's statements: the audit alone reads and writes them, a whole set per pass.

import type Database from 'better-sqlite3';

export class AuditSightings {
  private readonly all: Database.Statement;
  private readonly clear: Database.Statement;
  private readonly insert: Database.Statement;

  constructor(
    private readonly db: Database.Database,
    private readonly atomic: <T>(fn: () => T) => T,
  ) {
    this.all = db.prepare('SELECT key, first_seen FROM audit_sightings');
    this.clear = db.prepare('DELETE FROM audit_sightings');
    this.insert = db.prepare('INSERT INTO audit_sightings (key, first_seen) VALUES (?, ?)');
  }

  load(): Map<string, number> {
    const out = new Map<string, number>();
    for (const r of this.all.all() as Array<{ key: string; first_seen: number }>) out.set(r.key, r.first_seen);
    return out;
  }

  /** Replaces every sighting with `sightings`, in one commit. */
  save(sightings: ReadonlyMap<string, number>): void {
    this.atomic(() => {
      this.clear.run();
      for (const [key, at] of sightings) this.insert.run(key, at);
    });
  }
}
