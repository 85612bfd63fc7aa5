// What the running daemon says of the conflist it keeps (/v1/status, `stewardd status`, the
// steward_conflist_info metric): the cniVersion written, why, and whether the runtime asks STATUS.
// Read from the install record, which the watcher updates under the install lock.

import { describeChoice, type ConflistVersionChoice } from './cni-version.js';
import { readRecord } from './record.js';

export interface ConflistView {
  /** The version the conflist was written at; null before one is written. */
  cniVersion: string | null;
  choice: ConflistVersionChoice;
  /** The runtime that said what it is (`containerd v2.0.1`), or `unknown`. */
  runtime: string;
  statusAsked: boolean;
  summary: string;
}

/** Undefined when there is no record, or no choice in it nor of this daemon. */
export function conflistView(stateDir: string, own: ConflistVersionChoice | undefined): ConflistView | undefined {
  let rec;
  try {
    rec = readRecord(stateDir);
  } catch {
    rec = undefined;
  }
  const choice = rec?.cniVersion ?? own;
  if (choice === undefined) return undefined;
  const written = rec?.conflist?.cniVersion;
  return {
    cniVersion: written ?? null,
    choice,
    runtime: choice.runtime ? `${choice.runtime.name} ${choice.runtime.version}` : 'unknown',
    statusAsked: choice.statusAsked && written === '1.1.0',
    summary: describeChoice(choice, written),
  };
}
