// Fuzzing the shipped shim (dist/steward, the single executable a node runs) as a process against
// a real stewardd with a real bridge + host-local delegate in real network namespaces: a seeded
// PRNG mutates the CNI_* environment (command, container id, netns, ifname, args, CNI_PATH and the
// shim's own PATH: hostile, huge, control characters, unicode, missing) and stdin (valid netconfs
// mutated, huge, deeply nested, wrong types, "__proto__" keys, garbage bytes).
//
// Asserts: every call exits 0 with valid output, or non-zero with a CNI error JSON whose code is a
// documented one (docs/errors.md; a delegate's own code is passed through, and the Debian plugins'
// generic failure is libcni's 999) and never 104 ("a bug in steward"); no call dies by a signal; the daemon stays up and /healthz is
// ok; after DELing every ADD that succeeded, no host-local lease, no interface in any netns and no
// attachment `added`/`adding` is left; nothing lands in the spool's rejected dir. Prints the
// outcome table by command and code.
//
// Bounded: FUZZ_CALLS calls (default 400, as in `npm test` / .ci/run) and FUZZ_SECONDS (default
// 420) of wall time, whichever ends first. FUZZ_SEED picks the sequence (default 1). Longer runs:
// `npm run fuzz` (FUZZ_CALLS=3000 by default).
//
// Safety: whatever is mutated, fields that would reach the host outside this test's sandbox are
// pinned back after mutation: the socket and spool dir, and for every plugin object its bridge
// name, IPAM (subnet, dataDir), isGateway/ipMasq; plugin types are limited to harmless ones or
// garbage; netns values are this test's namespaces or paths that are not network namespaces
// (never /proc/<pid>/ns/net, which would be the host's).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Daemon } from '../helpers/daemon.js';
import { REPO, TestEnv, sh } from '../helpers/env.js';
import { prng } from '../helpers/fuzz-values.js';
import { isSandboxed, makeEnv, makeStdin, type Sandbox } from '../helpers/fuzz.js';
import { execPlugin } from '../helpers/shim.js';

const CALLS = Number(process.env.FUZZ_CALLS ?? 400);
const SECONDS = Number(process.env.FUZZ_SECONDS ?? 420);
const SEED = Number(process.env.FUZZ_SEED ?? 1);
const SHIM_EXE = join(REPO, 'dist/steward');

/** docs/errors.md: the CNI spec's codes and steward's own. */
const DOCUMENTED = new Set([1, 2, 3, 4, 5, 6, 7, 11, 50, 51, 100, 101, 102, 103, 104, 105, 106]);
/** Passed through from the delegates (docs/errors.md: "a delegate's own CNI error (any code)"): libcni's ErrInternal. */
const DELEGATE_CODES = new Set([999]);

const env = new TestEnv('fuzz');
const daemon = new Daemon(env, {
  args: ['--retry-base-ms', '200', '--retry-max-ms', '1000', '--plugin-timeout', '20'],
});
before(() => daemon.start());
after(() => env.close());

// ---- running the shim

interface Outcome {
  exit: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

async function runShim(envVars: Record<string, string>, stdin: string | Buffer): Promise<Outcome> {
  const r = await execPlugin(SHIM_EXE, envVars, stdin, { timeoutMs: 120_000 });
  return { exit: r.code, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

/** Why `o` breaks the shim's contract, or undefined. */
function violation(command: string | undefined, o: Outcome): string | undefined {
  if (o.signal) return `killed by ${o.signal}`;
  if (o.exit === 0) {
    if (o.stdout.trim() === '')
      return command === 'ADD' || command === 'VERSION' ? `${command} succeeded with empty output` : undefined;
    try {
      const j = JSON.parse(o.stdout) as Record<string, unknown>;
      if (typeof j.cniVersion !== 'string') return 'success output without cniVersion';
      return undefined;
    } catch {
      return 'success with invalid JSON on stdout';
    }
  }
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(o.stdout) as Record<string, unknown>;
  } catch {
    return `exit ${o.exit} without a CNI error JSON on stdout`;
  }
  if (typeof j.code !== 'number' || typeof j.msg !== 'string') return 'error JSON without numeric code and string msg';
  if (!DOCUMENTED.has(j.code) && !DELEGATE_CODES.has(j.code)) return `undocumented code ${j.code}`;
  return undefined;
}

describe(`fuzzing dist/steward: ${CALLS} calls, seed ${SEED}`, () => {
  it(
    'every call answers by the contract; the daemon stays healthy; nothing is left after DELing every successful ADD',
    { timeout: (SECONDS + 600) * 1000 },
    async () => {
      assert.ok(existsSync(SHIM_EXE), `${SHIM_EXE} is missing: npm run build`);
      const r = prng(SEED);
      const s: Sandbox = {
        socket: daemon.socket,
        spoolDir: daemon.spoolDir,
        bridge: env.bridge(),
        subnet: env.subnet(),
        dataDir: join(env.dir, 'ipam'),
      };
      const netnses = [env.netns(), env.netns(), env.netns()];
      const table = new Map<string, number>();
      const count = (k: string) => table.set(k, (table.get(k) ?? 0) + 1);
      /** The first message seen for each (command, code), printed in the table. */
      const example = new Map<string, string>();
      const violations: string[] = [];
      /** Code 104 is "a bug in steward" and 100 a delegate that failed without a CNI error: printed with their input. */
      const notable: string[] = [];
      const added = new Map<string, { env: Record<string, string>; stdin: string | Buffer }>();
      const deadline = Date.now() + SECONDS * 1000;
      let calls = 0;
      for (; calls < CALLS && Date.now() < deadline; calls++) {
        // Two calls in five are well-formed CNI calls (some with a mutated netconf), so ADDs succeed,
        // conflict, are CHECKed and DELed; the rest are hostile.
        const clean = r.chance(0.4);
        const envVars = makeEnv(r, netnses, clean);
        const stdin = makeStdin(r, s, clean);
        try {
          const decoded: unknown = JSON.parse(String(stdin.text).replace(/^\ufeff/, ''));
          assert.ok(
            isSandboxed(decoded, s),
            `call ${calls}: a netconf that does not name the test's socket and spool dir`,
          );
        } catch (e) {
          if (e instanceof assert.AssertionError) throw e;
        }
        const o = await runShim(envVars, stdin.text);
        const cmd = envVars.CNI_COMMAND;
        const label = ['ADD', 'DEL', 'CHECK', 'VERSION', 'STATUS', 'GC'].includes(cmd ?? '') ? cmd! : 'other';
        let code = 'ok';
        if (o.exit !== 0) {
          try {
            code = String((JSON.parse(o.stdout) as { code: unknown }).code);
          } catch {
            code = 'no-json';
          }
        }
        count(`${label}\t${code}`);
        if (code !== 'ok' && !example.has(`${label}\t${code}`)) {
          try {
            example.set(`${label}\t${code}`, String((JSON.parse(o.stdout) as { msg: unknown }).msg).slice(0, 110));
          } catch {
            /* counted as a violation */
          }
        }
        if (code === '104' || code === '100') {
          notable.push(
            `#${calls} ${label} ${code}: ${o.stdout.slice(0, 500)} env=${JSON.stringify(envVars).slice(0, 300)} stdin(${stdin.kind})=${String(stdin.text).slice(0, 300)}`,
          );
        }
        const bad = violation(cmd, o);
        if (bad) {
          violations.push(
            `#${calls} ${bad}: env=${JSON.stringify(envVars).slice(0, 400)} stdin(${stdin.kind})=` +
              `${String(stdin.text).slice(0, 200)} stdout=${o.stdout.slice(0, 300)} stderr=${o.stderr.slice(0, 300)}`,
          );
        }
        if (cmd === 'ADD' && o.exit === 0) {
          added.set(`${envVars.CNI_CONTAINERID}\0${envVars.CNI_IFNAME}\0${envVars.CNI_NETNS}\0${calls}`, {
            env: envVars,
            stdin: stdin.text,
          });
        }
        if (calls % 25 === 24) {
          assert.equal(
            daemon.proc?.exitCode,
            null,
            `stewardd exited during the fuzz (call ${calls}); see ${daemon.logFile}`,
          );
          const h = await daemon.get('/healthz');
          assert.equal(h.status, 200, `call ${calls}: /healthz ${h.text}`);
        }
      }

      // The outcome table.
      const rows = [...table.entries()].sort(([a], [b]) => a.localeCompare(b));
      const line = (a: string, b: string, c: string) => `${a.padEnd(9)} ${b.padStart(5)} ${c.padStart(6)}`;
      process.stderr.write(
        `\nfuzz: ${calls} calls (seed ${SEED}), ${added.size} successful ADDs\n${line('command', 'code', 'calls')}\n` +
          `${rows
            .map(([k, v]) => {
              const [c, code] = k.split('\t');
              return `${line(c!, code!, String(v))}  ${JSON.stringify(example.get(k) ?? '')}`;
            })
            .join('\n')}\n\n`,
      );
      if (notable.length > 0) process.stderr.write(`fuzz: calls answered 100 or 104:\n${notable.join('\n')}\n\n`);
      assert.deepEqual(violations, [], `${violations.length} contract violations`);
      assert.deepEqual(
        notable.filter((n) => / 104: /.test(n)),
        [],
        'code 104 is "a bug in steward" (docs/errors.md)',
      );
      assert.equal(daemon.proc?.exitCode, null, 'stewardd died');
      assert.equal((await daemon.get('/healthz')).status, 200);

      // DEL every ADD that succeeded, as the runtime would, with the same environment and netconf.
      for (const { env: e, stdin } of added.values()) {
        const o = await runShim({ ...e, CNI_COMMAND: 'DEL' }, stdin);
        assert.equal(o.exit, 0, `DEL after fuzz failed: ${o.stdout}`);
      }
      // Nothing left that was added, nor being added; interfaces and leases gone. A fuzzed
      // timeouts.del can make the shim spool a DEL (its row stays `added` until the spool is drained),
      // and a rollback or a drained DEL holds its lease and interface while its step is `deleting`
      // (the teardown queue): the leases and interfaces are looked at once both are done too. Past
      // the timeout the assertions below say what is left.
      const live = async () => [
        ...(await daemon.get('/v1/attachments?state=added')).json,
        ...(await daemon.get('/v1/attachments?state=adding')).json,
      ];
      const spooled = () =>
        (existsSync(daemon.spoolDir) ? readdirSync(daemon.spoolDir) : []).filter((n) => n.endsWith('.json'));
      await daemon
        .waitFor(
          'no attachment added/adding, no spooled DEL and no teardown left',
          async () =>
            (await live()).length === 0 && spooled().length === 0 && (await daemon.status()).teardownQueue.depth === 0,
          60_000,
        )
        .catch(() => undefined);
      assert.deepEqual(await live(), [], 'attachments left added/adding');
      const leftLeases = existsSync(s.dataDir)
        ? readdirSync(s.dataDir).flatMap((net) =>
            readdirSync(join(s.dataDir, net))
              .filter((f) => f !== 'lock' && !f.startsWith('last_reserved_ip'))
              .map((f) => `${net}/${f}`),
          )
        : [];
      const teardowns = (await daemon.get('/v1/teardowns')).json;
      assert.deepEqual(leftLeases, [], `leases left; pending teardowns: ${JSON.stringify(teardowns).slice(0, 2000)}`);
      for (const ns of netnses) {
        const links = JSON.parse(sh('ip', ['-n', ns.split('/').pop()!, '-j', 'link', 'show'])) as Array<{
          ifname: string;
        }>;
        assert.deepEqual(
          links.map((l) => l.ifname),
          ['lo'],
          `interfaces left in ${ns}`,
        );
      }
      // The sandbox held: nothing of ours in the machine's default spool dir (the shim's fallback).
      const machineSpool = '/var/lib/steward/spool';
      const ours = existsSync(machineSpool) ? readdirSync(machineSpool).filter((f) => /-fz-\d-/.test(f)) : [];
      assert.deepEqual(ours, [], `fuzz DELs spooled into ${machineSpool}`);
      const rejected = join(daemon.spoolDir, 'rejected');
      assert.deepEqual(existsSync(rejected) ? readdirSync(rejected) : [], [], 'files in spool/rejected');
      assert.equal((await daemon.get('/healthz')).status, 200);
    },
  );
});
