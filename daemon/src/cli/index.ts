// `stewardd status|attachments|teardowns|retry`: the operator's commands. Each is one request to
// the daemon's socket (cli/client.ts), printed as a short table (cli/format.ts) or, with -o json,
// as the API's JSON body (C1 controls and bidirectional overrides as JSON escapes). Exit codes: cli/client.ts Exit, documented in the README.
// One concern: each command from its flags to its exit code; how an answer is printed is cli/format.ts,
// its shape cli/answers.ts, the request cli/client.ts.

import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { DEFAULT_SOCKET } from '@cni-steward/shared';
import {
  DEFAULT_RELEASE_CAP,
  MAX_PASS_DEADLINE_MS,
  MAX_RELEASE_CAP,
  parseCap,
  parseCapFraction,
  parseDuration,
  parseRuntimeEndpoint,
} from '../audit/options.js';
import { isAuditAnswer, isObject, isRetryAnswer, isStatusAnswer, isTeardownsAnswer } from './answers.js';
import { call, CliError, Exit } from './client.js';
import { writeStdout } from './stdout.js';
import {
  formatAttachments,
  formatAudit,
  type AuditJson,
  formatDegradedStatus,
  formatStatus,
  formatTeardowns,
  isDegradedStatus,
  printable,
  printableJson,
  type AttachmentRow,
  type DegradedStatusJson,
  type StatusJson,
  type TeardownRow,
} from './format.js';

export const CLI_COMMANDS = ['status', 'attachments', 'teardowns', 'retry', 'audit'] as const;
export type CliCommand = (typeof CLI_COMMANDS)[number];

/**
 * How much earlier than --timeout an audit pass stops starting releases: the last release's own
 * run (a host-local DEL, a teardown) and the answer fit in it.
 */
const CLI_DEADLINE_MARGIN_MS = 10_000;

/** `stewardd audit`'s default --timeout, in seconds (the other commands': 5). */
const AUDIT_TIMEOUT_S = 60;
/** `retry` waits for the teardowns it runs: each plugin may take --plugin-timeout (60 s by default). */
const RETRY_TIMEOUT_S = 150;

const COMMON = `  --socket PATH        the daemon's socket (default ${DEFAULT_SOCKET})
  -o, --output FORMAT  table (default) or json (the API's JSON; controls and bidi overrides as \\u escapes)
  --timeout SEC        give up when the daemon does not answer within SEC (default 5, at most 2145600)`;

export const CLI_USAGE: Record<CliCommand, string> = {
  status: `usage: stewardd status [--check] [options]
  counts by state, the teardown queue, and the failing or abandoned teardown steps (pod, plugin,
  attempts, next retry, last error)
  --check              exit 1 when abandoned teardown steps exist (for scripts and cron)
${COMMON}`,
  attachments: `usage: stewardd attachments [--state S] [--pod NAMESPACE/NAME] [--container ID] [--limit N] [options]
  attachments, newest first, with the state of each delegate plugin step
  --state S            adding, added, deleting or deleted
${COMMON}`,
  teardowns: `usage: stewardd teardowns [options]
  every pending teardown step and the newest 1,000 abandoned ones (status counts them all)
${COMMON}`,
  retry: `usage: stewardd retry [--abandoned] [options]
  run every pending teardown now instead of at its next scheduled retry
  --abandoned          first give every abandoned teardown step another round of attempts (after
                       fixing its plugin, or releasing by hand what it held: the DEL then succeeds
                       and clears the step; one that still fails is abandoned again); steps of a
                       container added again since stay abandoned (their DEL would release its address)
${COMMON.replace('(default 5)', `(default ${RETRY_TIMEOUT_S})`)}`,
  audit: `usage: stewardd audit [--release] [--grace DUR] [--cap N] [--cap-fraction F] [--runtime-endpoint unix:///PATH] [options]
  what nobody owns on the node: host-local leases, libcni result-cache files, portmap's nat chains and
  journalled attachments whose container id no sandbox of the runtime (stewardd run --runtime-endpoint)
  has; never one with an ADD in flight
  --release            also release the orphans older than the grace (a journalled one through its normal
                       teardown, an unjournalled lease through a host-local DEL, a portmap rule through a
                       portmap DEL, a cache file by removal)
  --grace DUR          only release what is older than DUR (default 15m; e.g. 90s, 2h): a file by its
                       modification time, an attachment by its last journal change, a portmap rule by
                       its container's oldest lease or cache file, else when this daemon first saw it
  --cap N              release at most N orphans in this run (default ${DEFAULT_RELEASE_CAP}; 0 releases none)
  --cap-fraction F     and at most this fraction of one network's leases (above 0, at most 1; default
                       0.5, never fewer than 10 a network)
  Nothing is released on the runtime's word alone: only what the node shows unused (no interface in any
  network namespace has its address) past the grace, or what passes at least the grace apart both found
  orphaned; and nothing in a pass whose runtime answer contradicts the node (report only, says why).
  The pass stops starting releases a little before --timeout, so the answer is never cut off.
  --runtime-endpoint unix:///PATH
                       ask this CRI runtime who is alive, for this run, instead of the daemon's own
                       (stewardd run --runtime-endpoint, else the usual containerd and CRI-O sockets)
${COMMON.replace('(default 5)', `(default ${AUDIT_TIMEOUT_S})`)}`,
};

const EXIT_CODES = `exit codes: 0 ok; 1 (status --check) abandoned teardowns exist; 2 usage error;
  3 the socket is absent, not accessible or not answering; 4 the daemon answered with an error;
  5 (audit) no container runtime was reachable: report only, nothing released; or its answer was not
    trusted (the node contradicts it), or it stopped answering during the pass: nothing released after that;
  6 the answer could not be written to stdout (a full disk, a closed pipe)`;

interface Parsed {
  socket: string;
  json: boolean;
  timeoutMs: number;
  values: Record<string, string | boolean | undefined>;
}

function parse(command: CliCommand, argv: string[]): Parsed {
  const extra: Record<string, { type: 'string' | 'boolean' }> = {
    status: { check: { type: 'boolean' } },
    attachments: {
      state: { type: 'string' },
      pod: { type: 'string' },
      container: { type: 'string' },
      limit: { type: 'string' },
    },
    teardowns: {},
    retry: { abandoned: { type: 'boolean' } },
    audit: {
      release: { type: 'boolean' },
      grace: { type: 'string' },
      cap: { type: 'string' },
      'cap-fraction': { type: 'string' },
      'runtime-endpoint': { type: 'string' },
    },
  }[command] as Record<string, { type: 'string' | 'boolean' }>;
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        socket: { type: 'string' },
        output: { type: 'string', short: 'o' },
        timeout: { type: 'string' },
        ...extra,
      },
    }));
  } catch (e) {
    throw new CliError(`${(e as Error).message}\n\n${CLI_USAGE[command]}`, Exit.Usage);
  }
  const output = (values.output as string | undefined) ?? 'table';
  if (output !== 'table' && output !== 'json')
    throw new CliError(`-o must be table or json, got "${output}"`, Exit.Usage);
  const socket = socketFlag(values.socket as string | undefined);
  const timeout = timeoutFlag(command, values.timeout as string | undefined);
  return { socket, json: output === 'json', timeoutMs: timeout * 1000, values };
}

/** --timeout in seconds: the command's default unless given. */
function timeoutFlag(command: CliCommand, raw: string | undefined): number {
  // An audit pass asks the runtime (a 5 s deadline, daemon/src/audit/cri.ts) and may wait its turn and
  // host-local's locks: under the common 5 s a mute runtime read as a hung daemon (exit 3), not exit 5.
  const defaultTimeout = command === 'audit' ? AUDIT_TIMEOUT_S : command === 'retry' ? RETRY_TIMEOUT_S : 5;
  const rawTimeout = raw ?? String(defaultTimeout);
  // Decimal seconds only: Number() would also take "0x10", "1e1" and " 5".
  const timeout = /^[0-9]+(\.[0-9]+)?$/.test(rawTimeout) ? Number(rawTimeout) : NaN;
  // At most what a timer holds (2^31 ms) and an audit's deadline may be (596 h): a longer one was
  // truncated with a warning, and audit's deadline then refused by stewardd as its own error (exit 4).
  if (!(timeout > 0) || !(timeout <= MAX_TIMEOUT_S))
    throw new CliError(
      `--timeout must be a number of seconds above 0 and at most ${MAX_TIMEOUT_S} (596 h), got "${rawTimeout}"`,
      Exit.Usage,
    );
  return timeout;
}

/** --socket, absolute. */
function socketFlag(raw: string | undefined): string {
  // resolve('') is the working directory: "is not a socket" named a directory nobody gave.
  if (raw === '') throw new CliError('--socket needs a path', Exit.Usage);
  const socket = resolve(raw ?? DEFAULT_SOCKET);
  // What connect(2) takes (sun_path): a longer one failed as "connect EINVAL … Local (undefined:undefined)".
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH_BYTES)
    throw new CliError(
      `--socket must be a path of at most ${MAX_SOCKET_PATH_BYTES} bytes (a Unix socket's), got one of ${Buffer.byteLength(socket)}`,
      Exit.Usage,
    );
  return socket;
}

function attachmentsQuery(v: Parsed['values']): string {
  const q = new URLSearchParams();
  const pod = v.pod as string | undefined;
  if (pod !== undefined && !/^[^/]+\/[^/]+$/.test(pod))
    throw new CliError(`--pod must be NAMESPACE/NAME, got "${pod}"`, Exit.Usage);
  const limit = v.limit as string | undefined;
  if (limit !== undefined && !(/^[0-9]{1,6}$/.test(limit) && Number(limit) >= 1 && Number(limit) <= 100_000))
    throw new CliError(`--limit must be a whole number from 1 to 100000, got "${limit}"`, Exit.Usage);
  for (const [flag, param] of [
    ['state', 'state'],
    ['pod', 'pod'],
    ['container', 'containerId'],
    ['limit', 'limit'],
  ] as const) {
    const value = v[flag];
    if (typeof value === 'string') q.set(param, value);
  }
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

/** The longest path a Unix socket address holds (sun_path, less its terminating NUL). */
const MAX_SOCKET_PATH_BYTES = 107;

/** The longest --timeout, in seconds: 596 h, under a timer's 2^31 ms and stewardd's longest audit deadline. */
const MAX_TIMEOUT_S = MAX_PASS_DEADLINE_MS / 1000;

/**
 * The API's JSON body (-o json, printableJson), or the table, every line of it printable whatever the
 * answer held. An answer of the right outline whose fields cannot be read as stewardd writes them (a
 * number where a list is, `"steps": "x"`) is not stewardd's either: exit 4, never a TypeError's exit 1,
 * which `status --check` gives for abandoned steps.
 */
async function out(json: boolean, body: string, human: () => string): Promise<void> {
  if (json) return writeStdout(printableJson(body.trimEnd()));
  let text: string;
  try {
    text = human();
  } catch (e) {
    throw new CliError(
      `the answer is not what stewardd answers (another program on the socket, or another version of stewardd): it cannot be read (${printable(String((e as Error)?.message ?? e))})`,
      Exit.DaemonError,
    );
  }
  return writeStdout(text.split('\n').map(printable).join('\n'));
}

/** Runs one CLI command; prints to stdout/stderr and resolves with the exit code. */
export async function runCli(command: CliCommand, argv: string[], now: () => number = Date.now): Promise<number> {
  try {
    if (argv.includes('--help') || argv.includes('-h')) {
      // Through writeStdout like any answer: a stdout that cannot take it is exit 6, not 0.
      await writeStdout(`${CLI_USAGE[command]}\n${EXIT_CODES}`);
      return Exit.Ok;
    }
    const p = parse(command, argv);
    switch (command) {
      case 'status': {
        const r = await call(p.socket, 'GET', '/v1/status', p.timeoutMs, isStatusAnswer);
        const s = r.json as StatusJson | DegradedStatusJson;
        if (isDegradedStatus(s)) {
          await out(p.json, r.body, () => formatDegradedStatus(s));
          // --check cannot tell whether abandoned steps exist: the journal holding them is unreadable.
          if (p.values.check !== true) return Exit.Ok;
          console.error(`stewardd: degraded, abandoned teardown steps cannot be read: ${printable(s.reason)}`);
          return Exit.DaemonError;
        }
        await out(p.json, r.body, () => formatStatus(s, now()));
        return p.values.check === true && (s.steps.abandoned ?? 0) > 0 ? Exit.Abandoned : Exit.Ok;
      }
      case 'attachments': {
        const path = `/v1/attachments${attachmentsQuery(p.values)}`;
        const r = await call(p.socket, 'GET', path, p.timeoutMs, (j) => Array.isArray(j) && j.every(isObject));
        await out(p.json, r.body, () => formatAttachments(r.json as AttachmentRow[]));
        return Exit.Ok;
      }
      case 'teardowns': {
        const r = await call(p.socket, 'GET', '/v1/teardowns', p.timeoutMs, isTeardownsAnswer);
        await out(p.json, r.body, () =>
          formatTeardowns(r.json as { pending: TeardownRow[]; abandoned: TeardownRow[] }, now()),
        );
        return Exit.Ok;
      }
      case 'retry': {
        const path = p.values.abandoned === true ? '/v1/teardowns/retry?abandoned=true' : '/v1/teardowns/retry';
        const r = await call(p.socket, 'POST', path, p.timeoutMs, isRetryAnswer).catch(goesOn(RETRY_GOES_ON));
        await out(p.json, r.body, () => retryLine(r.json as RetryAnswer, p.values.abandoned === true));
        return Exit.Ok;
      }
      case 'audit':
        return await audit(p);
    }
  } catch (e) {
    if (!(e instanceof CliError)) throw e;
    console.error(`stewardd ${command}: ${e.message}`);
    return e.exitCode;
  }
}

/** The audit query's flags, each checked before the daemon is asked (a bad one is exit 2). */
const AUDIT_FLAGS: ReadonlyArray<[flag: string, param: string, ok: (v: string) => boolean, must: string]> = [
  ['grace', 'grace', (v) => parseDuration(v) !== undefined, 'a duration such as 90s, 15m or 1h30m'],
  ['cap', 'cap', (v) => parseCap(v) !== undefined, `a whole number from 0 to ${MAX_RELEASE_CAP}`],
  ['cap-fraction', 'capFraction', (v) => parseCapFraction(v) !== undefined, 'a number above 0 and at most 1'],
  ['runtime-endpoint', 'runtimeEndpoint', (v) => parseRuntimeEndpoint(v) !== undefined, 'unix:///ABSOLUTE/PATH'],
];

async function audit(p: Parsed): Promise<number> {
  const q = new URLSearchParams();
  if (p.values.release === true) q.set('release', 'true');
  for (const [flag, param, ok, must] of AUDIT_FLAGS) {
    const v = p.values[flag];
    if (typeof v !== 'string') continue;
    if (!ok(v)) throw new CliError(`--${flag} must be ${must}, got "${v}"`, Exit.Usage);
    q.set(param, v);
  }
  const release = p.values.release === true || q.has('grace') || q.has('cap') || q.has('capFraction');
  // The pass stops starting releases before this command would give up on its answer.
  q.set('deadline', `${Math.max(1000, p.timeoutMs - CLI_DEADLINE_MARGIN_MS)}ms`);
  const r = await call(
    p.socket,
    release ? 'POST' : 'GET',
    `/v1/audit?${q.toString()}`,
    p.timeoutMs,
    isAuditAnswer,
  ).catch(goesOn(AUDIT_GOES_ON));
  const a = r.json as AuditJson;
  await out(p.json, r.body, () => formatAudit(a));
  // A runtime whose answer the node contradicted was asked, but nothing could be released on its
  // word: a script reading only the exit code must not take that pass for one that did its work.
  return a.runtime.reachable && a.runtime.distrusted === undefined ? Exit.Ok : Exit.NoRuntime;
}

/** POST /v1/teardowns/retry's answer. */
interface RetryAnswer {
  attempted: number;
  done: number;
  pending: number;
  /** Finished by abandoning a step (a daemon before this answer does not say). */
  abandoned?: number;
  /** Steps abandoned, in attachments finished or still pending (the same). */
  stepsAbandoned?: number;
  rearmed?: number;
  skippedNewer?: number;
}

/** `stewardd retry`'s line. */
function retryLine(x: RetryAnswer, abandoned: boolean): string {
  const lost = x.stepsAbandoned ?? x.abandoned ?? 0;
  const skipped = x.skippedNewer
    ? `left ${x.skippedNewer} attachment(s) abandoned: their container was added again (their DEL would release the new one's address); `
    : '';
  return (
    (abandoned ? `re-armed ${x.rearmed ?? 0} abandoned step(s); ${skipped}` : '') +
    `retried ${x.attempted} attachment(s): ${x.done} torn down, ` +
    (x.abandoned ? `${x.abandoned} finished by abandoning a step, ` : '') +
    `${x.pending} still pending` +
    (lost > 0 ? `; ${lost} step(s) abandoned (what they held may be leaked: stewardd teardowns)` : '')
  );
}

const AUDIT_GOES_ON =
  '; the pass may still be running in stewardd (it waits its turn behind other passes, and' +
  ' starts no release after its deadline): its releases are in the log and the next audit shows what is left';
const RETRY_GOES_ON =
  '; the teardowns it started go on in stewardd (each plugin within --plugin-timeout): `stewardd teardowns` shows where they are';

/** A timed-out answer's message, told what goes on in stewardd meanwhile. */
function goesOn(more: string): (e: unknown) => never {
  return (e) => {
    if (e instanceof CliError && /did not answer within/.test(e.message)) e.message += more;
    throw e;
  };
}
