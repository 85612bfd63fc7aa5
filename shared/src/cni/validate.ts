// Validation of the identifiers a runtime hands us, as the CNI spec defines them (SPEC.md,
// "Parameters"), and of delegate plugin type names, which become file names we execute.

const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
/**
 * Control characters: C0, DEL and C1 (U+0080–U+009F). C1 too: NEL (U+0085) is white space to the
 * plugins' Go (unicode.IsSpace), so bridge refused an ifname holding it and its rollback DEL alike,
 * an abandoned step for nothing (found by a hostile review).
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
export const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f]/;

/** Container ids and network names share the spec's rule. Returns a reason when invalid. */
function checkName(name: string): string | undefined {
  if (name === '') return 'is empty';
  if (!NAME_RE.test(name))
    return 'must start with an alphanumeric character and contain only alphanumerics, "_", "." and "-"';
  return undefined;
}

/**
 * The longest container id accepted. The CNI spec sets no bound; containerd, CRI-O and podman generate
 * 64 hex characters. 1024 leaves any runtime room while refusing ids that only bloat the journal, logs
 * and spool (issue 19: 100,000-character ids were accepted).
 */
export const MAX_CONTAINER_ID_LENGTH = 1024;

/** Returns a reason when invalid, undefined when valid. */
export function checkContainerId(id: string): string | undefined {
  if (id.length > MAX_CONTAINER_ID_LENGTH)
    return `is ${id.length} characters long; at most ${MAX_CONTAINER_ID_LENGTH} are accepted (runtimes use 64)`;
  return checkName(id);
}

/** Linux interface names: 1..15 bytes, not "." or "..", no "/", ":" or whitespace. */
export function checkIfName(name: string): string | undefined {
  if (name === '') return 'is empty';
  if (Buffer.byteLength(name) > 15) return 'is longer than 15 bytes';
  if (name === '.' || name === '..') return 'must not be "." or ".."';
  if (/[/:\s]/.test(name)) return 'must not contain "/", ":" or whitespace';
  if (CONTROL_RE.test(name)) return 'must not contain control characters';
  return undefined;
}

export function checkNetworkName(name: string): string | undefined {
  return checkName(name);
}

/**
 * The longest network name an ADD accepts (the spec's characters are ASCII: bytes and characters
 * alike). A network's name becomes a file name: host-local keeps its leases in <dataDir>/<name>, a
 * runtime's libcni its cache in <cacheDir>/results/<name>-<id>-<ifname>. Past NAME_MAX (255) a
 * host-local delegate's ADD failed "file name too long", and so did its rollback DEL at every retry,
 * an abandoned step for nothing (found by a hostile probe). Only ADD is refused: DEL, CHECK, GC and
 * STATUS of a name accepted before this bound are served as they were.
 */
export const MAX_NETWORK_NAME_LENGTH = 255;

/** A plugin type is a bare file name looked up in the bin dirs: never a path. */
export function checkPluginType(type: string): string | undefined {
  if (type === '') return 'is empty';
  if (type.includes('/') || type.includes('\\')) return 'must be a bare plugin name, not a path';
  if (!NAME_RE.test(type))
    return 'must start with an alphanumeric character and contain only alphanumerics, "_", "." and "-"';
  return undefined;
}
