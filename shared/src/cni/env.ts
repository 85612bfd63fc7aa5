// Reading the CNI_* environment of one invocation. Every problem is reported in one error
// (code 4), so an operator fixes them all at once rather than one per retry.

import { CniError, ErrorCode, clip } from './errors.js';
import { CNI_COMMANDS, type CniCommand, type CniEnv } from './types.js';
import { CONTROL_RE, checkContainerId, checkIfName } from './validate.js';

type Var = 'CNI_CONTAINERID' | 'CNI_NETNS' | 'CNI_IFNAME' | 'CNI_PATH';

/** Which variables each command requires (CNI spec, "Parameters"); DEL may have an empty netns. */
const REQUIRED: Record<CniCommand, readonly Var[]> = {
  ADD: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  CHECK: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  DEL: ['CNI_CONTAINERID', 'CNI_IFNAME', 'CNI_PATH'],
  GC: ['CNI_PATH'],
  STATUS: ['CNI_PATH'],
  VERSION: [],
};

export type EnvSource = Readonly<Record<string, string | undefined>>;

/** Why an ADD or CHECK with "%" in CNI_IFNAME is refused (shim/env.go says the same). */
export const IFNAME_TEMPLATE =
  'CNI_IFNAME must not contain "%": the kernel reads it as a name template (eth%d becomes eth0)';

/** Linux's limit on one environment string, "NAME=value" and its NUL (32 pages). */
export const MAX_ARG_STRLEN = 32 * 4096;

export function parseCniEnv(env: EnvSource): CniEnv {
  const problems: string[] = [];
  const rawCommand = env.CNI_COMMAND ?? '';
  if (rawCommand === '') {
    throw new CniError(ErrorCode.InvalidEnv, 'CNI_COMMAND is not set', `expected one of ${CNI_COMMANDS.join(', ')}`);
  }
  if (!(CNI_COMMANDS as readonly string[]).includes(rawCommand)) {
    throw new CniError(
      ErrorCode.InvalidEnv,
      `CNI_COMMAND "${rawCommand}" is not a CNI command`,
      `expected one of ${CNI_COMMANDS.join(', ')}`,
    );
  }
  const command = rawCommand as CniCommand;
  for (const name of REQUIRED[command]) {
    if ((env[name] ?? '') === '') problems.push(`${name} is not set`);
  }
  for (const name of ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_ARGS', 'CNI_PATH'] as const) {
    if (CONTROL_RE.test(env[name] ?? '')) problems.push(`${name} contains control characters`);
    // Node decodes the environment as UTF-8 and puts U+FFFD for bytes that are not: the value is no
    // longer what the runtime sent (two ifnames would become one attachment key). The Go shim
    // (shim/env.go) refuses the same bytes before they are sent.
    if ((env[name] ?? '').includes('\uFFFD')) problems.push(`${name} is not valid UTF-8`);
    // A plugin is exec'd with these: the kernel refuses a "NAME=value" string over MAX_ARG_STRLEN
    // (E2BIG), and the step would fail without its plugin ever running. Only a client of the socket
    // can send one: a runtime cannot exec the shim with it either.
    if (Buffer.byteLength(`${name}=${env[name] ?? ''}`) + 1 > MAX_ARG_STRLEN)
      problems.push(
        `${name} is longer than a plugin's environment can carry (${MAX_ARG_STRLEN} bytes as ${name}=value)`,
      );
  }
  const containerId = env.CNI_CONTAINERID ?? '';
  const ifname = env.CNI_IFNAME ?? '';
  if (containerId !== '') {
    const why = checkContainerId(containerId);
    if (why) problems.push(`CNI_CONTAINERID ${why}`);
  }
  if (ifname !== '') {
    const why = checkIfName(ifname);
    if (why) problems.push(`CNI_IFNAME ${why}`);
  }
  // DEL stays lenient (a DEL that cannot succeed pins the sandbox); teardown uses the ADD's args.
  if (command === 'ADD' || command === 'CHECK') {
    const why = cniArgsProblem(env.CNI_ARGS ?? '');
    if (why) problems.push(why);
    // The kernel reads "%" in a new link's name as a template: the bridge plugin asked for eth%d
    // makes eth0, which the DEL of eth%d never finds. DEL of such a name is still let through.
    if (ifname.includes('%')) problems.push(IFNAME_TEMPLATE);
  }
  if (problems.length > 0) {
    throw new CniError(ErrorCode.InvalidEnv, `invalid CNI environment: ${problems.join('; ')}`);
  }
  return {
    command,
    containerId,
    netns: env.CNI_NETNS ?? '',
    ifname,
    args: env.CNI_ARGS ?? '',
    path: env.CNI_PATH ?? '',
  };
}

/**
 * Why CNI_ARGS would be refused by the reference plugins' parser (cni pkg/types LoadArgs): it
 * splits on ";" and wants every piece to split on "=" into exactly two parts, so an empty pair
 * (a trailing ";"), a pair without "=" or a value containing "=" fails every plugin's ADD and,
 * identically, its DEL. Refused up front with code 4 instead of leaving a rollback that can never
 * finish.
 */
export function cniArgsProblem(args: string): string | undefined {
  if (args === '') return undefined;
  for (const pair of args.split(';')) {
    if (pair.split('=').length !== 2) {
      return `CNI_ARGS pair "${clip(pair, 64)}" is malformed: want KEY=VALUE pairs separated by ";" (no empty pair, no "=" in a value)`;
    }
  }
  return undefined;
}

/** Parses CNI_ARGS ("K=V;K2=V2") into pairs; malformed pairs are a code 4 error. */
export function parseCniArgs(args: string): Array<[string, string]> {
  if (args === '') return [];
  return args
    .split(';')
    .filter((p) => p !== '')
    .map((pair) => {
      const eq = pair.indexOf('=');
      if (eq <= 0) throw new CniError(ErrorCode.InvalidEnv, `CNI_ARGS has a malformed pair "${pair}"`);
      return [pair.slice(0, eq), pair.slice(eq + 1)];
    });
}
