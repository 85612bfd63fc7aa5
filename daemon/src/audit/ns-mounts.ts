// The nsfs mounts of a mount table (/proc/PID/mountinfo): where a namespace no process is in is
// still pinned, and so still in use (node-addresses.ts reads the network namespaces among them).

import { isUtf8 } from 'node:buffer';

/** One nsfs mount in a mount table: which namespace is mounted, and where. */
export interface NsMount {
  /** The namespace's kind (`net`, `uts`, `ipc`, `mnt`, …) from the root field (`net:[4026532001]`); '' if none. */
  kind: string;
  /** The namespace's inode (the root field's number); 0 when the field names none. */
  ino: number;
  /** Where it is mounted in that mount namespace, escapes decoded; undefined when not UTF-8 (not nameable to nsenter). */
  mountPoint: string | undefined;
}

/**
 * The nsfs mounts of one mount table (`/proc/PID/mountinfo`, as bytes). Per proc(5) each line is
 * `ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPER-OPTIONS`: zero or more
 * optional fields (`shared:2`, `master:1`) end at a lone `-`, the filesystem type follows it; a space,
 * tab, newline or backslash in a path is an octal escape (`\040`, `\011`, `\012`, `\134`). Paths are bytes.
 */
export function parseNsMounts(table: Buffer): NsMount[] {
  const out: NsMount[] = [];
  for (const line of table.toString('latin1').split('\n')) {
    const fields = line.split(' ');
    // The separator comes after the six fixed fields (none of which is a lone '-': ids are numbers,
    // the root and mount point paths); a line without it is none of the kernel's.
    const sep = fields.indexOf('-');
    if (sep < 6 || fields[sep + 1] !== 'nsfs') continue;
    const ns = /^([a-z]+):\[(\d+)\]$/.exec(fields[3] as string);
    const escaped = fields[4] as string;
    const bytes = Buffer.from(
      escaped.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))),
      'latin1',
    );
    out.push({
      kind: ns?.[1] ?? '',
      ino: Number(ns?.[2] ?? 0),
      mountPoint: isUtf8(bytes) ? bytes.toString() : undefined,
    });
  }
  return out;
}
