// Finding a delegate plugin's executable: a bare type name, looked up in the daemon's own bin
// dirs first and then in the request's CNI_PATH. Never a path from the request. A relative
// CNI_PATH entry ("bin", "./x") would resolve against the daemon's working directory, which means
// nothing to the runtime that sent it: such entries are dropped, and reported to `onIgnored`.

import { accessSync, constants, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { CniError, ErrorCode, checkPluginType, clip } from '@cni-steward/shared';

function splitPath(list: string, onIgnored?: (entry: string) => void): string[] {
  return list.split(':').filter((d) => {
    if (d === '') return false;
    if (isAbsolute(d)) return true;
    onIgnored?.(d);
    return false;
  });
}

/**
 * The dir list handed to plugins as CNI_PATH (so bridge finds host-local): ours first, then the
 * request's absolute entries, deduplicated. Relative request entries are left out (`onIgnored`).
 */
export function pluginSearchPath(
  binDirs: readonly string[],
  requestPath: string,
  onIgnored?: (entry: string) => void,
): string[] {
  return [...new Set([...binDirs, ...splitPath(requestPath, onIgnored)])];
}

/**
 * The code of a delegate binary that no dir has, by command; any other is 7 (an ADD's netconf names
 * a plugin the node lacks). A DEL's is 11: a binary missing for a while (a plugin upgrade, a hostPath
 * remounted) must not make a teardown "permanently failing" and abandoned; it is retried until the
 * binary is back. A STATUS's is 50, the spec's "not available": no ADD can be served.
 */
export function missingPluginCode(command: string): number {
  if (command === 'DEL') return ErrorCode.TryAgainLater;
  return command === 'STATUS' ? ErrorCode.PluginNotAvailable : ErrorCode.InvalidConfig;
}

/**
 * The executable of a plugin type in the first dir that has it. `missingCode`: the code when no dir
 * has it (a type that is no file name is always 7): missingPluginCode of the command.
 */
export function findPlugin(
  type: string,
  dirs: readonly string[],
  missingCode: number = ErrorCode.InvalidConfig,
): string {
  const why = checkPluginType(type);
  if (why) throw new CniError(ErrorCode.InvalidConfig, `plugin type "${clip(type, 200)}" ${why}`);
  for (const dir of dirs) {
    const candidate = join(dir, type);
    try {
      if (!statSync(candidate).isFile()) continue;
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      continue;
    }
  }
  // Worded without "not found": runtimes read that phrase in a DEL error as success.
  throw new CniError(
    missingCode,
    `plugin type "${clip(type, 200)}" is not in any plugin dir`,
    `searched: ${dirs.join(':') || '(none)'}`,
  );
}
