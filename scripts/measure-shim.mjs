// Measures one CNI call through the single-executable shim (dist/steward) against curl sending
// the same HTTP request to the same daemon, with hyperfine; also the Node shim for reference.
// The call is a DEL answered from a tombstone (no plugin runs), so the figure is the shim alone.
// Usage (after npm run build): node scripts/measure-shim.mjs [runs]   — medians in ms on stdout.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const REPO = resolve(import.meta.dirname, '..');
const runs = process.argv[2] ?? '40';
const dir = mkdtempSync(join(tmpdir(), 'stw-measure-'));
const socket = join(dir, 'stewardd.sock');
writeFileSync(join(dir, 'boot_id'), 'measure\n');
const daemon = spawn(
  process.execPath,
  [
    join(REPO, 'bin/stewardd'),
    'run',
    '--socket',
    socket,
    '--state-dir',
    join(dir, 'state'),
    '--boot-id-file',
    join(dir, 'boot_id'),
    '--bin-dir',
    join(REPO, 'test/fixtures/bin'),
    '--log-level',
    'warn',
  ],
  { stdio: 'ignore' },
);
try {
  for (let i = 0; i < 200 && !existsSync(socket); i++) await new Promise((r) => setTimeout(r, 50));
  const conf = {
    cniVersion: '1.0.0',
    name: 'steward',
    type: 'steward',
    socket,
    spoolDir: join(dir, 'spool'),
    delegates: [
      { cniVersion: '1.0.0', name: 'measure', plugins: [{ type: 'steward-fixture', stateDir: join(dir, 'fx') }] },
    ],
  };
  const env = {
    CNI_COMMAND: 'DEL',
    CNI_CONTAINERID: 'measure-1',
    CNI_IFNAME: 'eth0',
    CNI_NETNS: '',
    CNI_PATH: '/opt/cni/bin',
  };
  const confFile = join(dir, 'conf.json');
  const bodyFile = join(dir, 'body.json');
  writeFileSync(confFile, JSON.stringify(conf));
  writeFileSync(
    bodyFile,
    JSON.stringify({
      env: {
        CNI_COMMAND: 'DEL',
        CNI_CONTAINERID: 'measure-1',
        CNI_IFNAME: 'eth0',
        CNI_NETNS: '',
        CNI_PATH: '/opt/cni/bin',
      },
      config: conf,
    }),
  );
  const childEnv = { ...process.env, ...env };
  // First DEL creates the tombstone every timed call is answered from.
  execFileSync(join(REPO, 'dist/steward'), { input: readFileSync(confFile), env: childEnv });
  const curl = `curl -sf --unix-socket ${socket} -X POST -H 'Content-Type: application/json' --data-binary @${bodyFile} http://localhost/v1/cni`;
  const cmds = {
    curl,
    'dist/steward': `${REPO}/dist/steward < ${confFile}`,
    'node bin/steward': `${process.execPath} ${REPO}/bin/steward < ${confFile}`,
  };
  const measure = (extraEnv) => {
    const out = join(dir, 'hf.json');
    execFileSync(
      'hyperfine',
      [
        '--shell',
        'sh',
        '--style',
        'none',
        '--warmup',
        '3',
        '--runs',
        runs,
        '--export-json',
        out,
        ...Object.values(cmds),
      ],
      { env: { ...childEnv, ...extraEnv }, stdio: ['ignore', 'ignore', 'inherit'] },
    );
    const res = JSON.parse(readFileSync(out, 'utf8')).results;
    return Object.fromEntries(Object.keys(cmds).map((k, i) => [k, +(res[i].median * 1000).toFixed(1)]));
  };
  const ca = process.env.NODE_EXTRA_CA_CERTS ?? '/etc/ssl/certs/ca-certificates.crt';
  const withCa = measure({ NODE_EXTRA_CA_CERTS: ca });
  delete childEnv.NODE_EXTRA_CA_CERTS;
  const withoutCa = measure({});
  const size = statSync(join(REPO, 'dist/steward')).size;
  console.log(
    JSON.stringify(
      {
        runs: Number(runs),
        shimBytes: size,
        medianMs: { NODE_EXTRA_CA_CERTS_set: withCa, NODE_EXTRA_CA_CERTS_unset: withoutCa },
      },
      null,
      2,
    ),
  );
} finally {
  daemon.kill('SIGINT');
  await new Promise((r) => daemon.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
}
