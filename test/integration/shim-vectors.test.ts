// The shim's contract vectors (shared/vectors/shim.json) run against the built binary
// (dist/steward), as a runtime runs it: env and stdin in, stdout, exit code and the spool out,
// against a Unix socket server that answers as each vector says (an HTTP answer, raw bytes, a
// refused connection, a frozen daemon). go test runs the same vectors through the Go logic
// in-process (shim/vectors_test.go); this is the built binary's turn. Vectors marked goOnly need an
// injected clock and are skipped here.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { REPO, TestEnv } from '../helpers/env.js';

const SHIM_EXE = join(REPO, 'dist/steward');

type Gen = string | { $repeat?: string; times?: number; prefix?: string; $hex?: string };
interface HttpReply {
  status?: number;
  body?: string;
  protocol?: string;
  raw?: string;
}
interface Vector {
  name: string;
  env: Record<string, Gen>;
  stdin?: unknown;
  reply?: 'unreachable' | 'frozen' | 'none' | HttpReply;
  spool?: 'fails';
  goOnly?: string;
  want: {
    exitCode: number;
    stdout?: string;
    code?: number;
    cniVersion?: string;
    msg?: string;
    msgNot?: string;
    sent?: boolean | { method?: string; path?: string; headers?: Record<string, string | null>; body?: unknown };
    spooled?: boolean | { containerId: string; body?: unknown };
    maxMs?: number;
  };
}
const file = JSON.parse(readFileSync(join(REPO, 'shared/vectors/shim.json'), 'utf8')) as {
  netconf: Record<string, unknown>;
  vectors: Vector[];
};
const spoolName = new RegExp(
  (JSON.parse(readFileSync(join(REPO, 'shared/vectors/spool.json'), 'utf8')) as { namePattern: string }).namePattern,
);

const env = new TestEnv('shim-vectors');
after(() => env.close());

/** A vector string as bytes: a string, {$repeat, times, prefix} or {$hex}. */
function gen(g: Gen): Buffer {
  if (typeof g === 'string') return Buffer.from(g, 'utf8');
  if (g.$hex !== undefined) return Buffer.from(g.$hex, 'hex');
  return Buffer.from((g.prefix ?? '') + (g.$repeat ?? '').repeat(g.times ?? 0), 'utf8');
}
const isGen = (v: unknown) => typeof v === 'object' && v !== null && ('$repeat' in v || '$hex' in v);

function stdinOf(spec: unknown, subst: (s: string) => string): { data: Buffer; open: boolean } {
  if (spec === undefined) return { data: Buffer.alloc(0), open: false };
  if (typeof spec === 'string') return { data: Buffer.from(subst(spec), 'utf8'), open: false };
  const o = spec as Record<string, unknown>;
  if ('$netconf' in o) {
    const conf: Record<string, unknown> = { ...file.netconf };
    for (const [k, v] of Object.entries(o)) {
      if (k !== '$netconf') conf[k] = isGen(v) ? gen(v as Gen).toString('utf8') : v;
    }
    return { data: Buffer.from(subst(JSON.stringify(conf)), 'utf8'), open: false };
  }
  if ('$parts' in o) {
    const parts = (o.$parts as unknown[]).map((p) =>
      typeof p === 'object' && p !== null && '$netconf' in p
        ? stdinOf(p, subst).data
        : Buffer.from(subst(gen(p as Gen).toString('latin1')), 'latin1'),
    );
    let data = Buffer.concat(parts);
    if (typeof o.$pad === 'number' && data.length < o.$pad)
      data = Buffer.concat([data, Buffer.alloc(o.$pad - data.length, 0x20)]);
    return { data, open: o.$open === true };
  }
  return { data: Buffer.from(subst(JSON.stringify(spec)), 'utf8'), open: false };
}

interface Recorded {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

/** The fake stewardd for one vector; resolves once it listens. */
async function fakeDaemon(
  socket: string,
  reply: Vector['reply'],
): Promise<{ reqs: Recorded[]; close(): Promise<void> }> {
  const reqs: Recorded[] = [];
  if (reply === 'unreachable') {
    // A regular file where the socket should be: connect(2) answers ECONNREFUSED (a stale socket).
    writeFileSync(socket, '');
    return { reqs, close: async () => undefined };
  }
  const held: Socket[] = [];
  const server: Server = createServer((c) => {
    held.push(c);
    c.on('error', () => undefined);
    if (reply === 'frozen') return;
    let buf = Buffer.alloc(0);
    c.on('data', (b: Buffer) => {
      buf = Buffer.concat([buf, b]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        if (i > 0) headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (buf.length < end + 4 + length) return;
      c.removeAllListeners('data');
      const [method = '', path = ''] = lines[0]!.split(' ');
      reqs.push({ method, path, headers, body: buf.subarray(end + 4, end + 4 + length) });
      const r: HttpReply =
        reply === undefined || reply === 'none'
          ? { status: 200, body: '{"cniVersion":"1.0.0"}', protocol: '2' }
          : reply;
      if (r.raw !== undefined) {
        c.end(Buffer.from(r.raw, 'latin1'));
        return;
      }
      const body = Buffer.from(r.body ?? '', 'utf8');
      c.end(
        Buffer.concat([
          Buffer.from(
            `HTTP/1.1 ${r.status} X\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n` +
              (r.protocol !== undefined ? `x-steward-protocol: ${r.protocol}\r\n` : '') +
              'connection: close\r\n\r\n',
            'latin1',
          ),
          body,
        ]),
      );
    });
  });
  await new Promise<void>((r) => server.listen(socket, r));
  return {
    reqs,
    close: () =>
      new Promise<void>((r) => {
        for (const c of held) c.destroy();
        server.close(() => r());
      }),
  };
}

/** Runs the shim with `vars` (bytes: a value that is not UTF-8 goes through sh's printf) and stdin. */
function runShim(
  vars: Record<string, Buffer>,
  stdin: Buffer,
  open: boolean,
): Promise<{ code: number | null; stdout: Buffer; ms: number }> {
  const plain: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
  const exports: string[] = [];
  for (const [k, v] of Object.entries(vars)) {
    if (Buffer.from(v.toString('utf8'), 'utf8').equals(v)) plain[k] = v.toString('utf8');
    else exports.push(`export ${k}="$(printf '${[...v].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('')}')"`);
  }
  const [file, args] =
    exports.length === 0 ? [SHIM_EXE, []] : ['/bin/sh', ['-c', `${exports.join('; ')}; exec "$0"`, SHIM_EXE]];
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(file, args, { env: plain, stdio: ['pipe', 'pipe', 'ignore'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.on('error', reject);
    child.stdin.on('error', () => undefined);
    child.on('close', (code) => {
      child.stdin.destroy();
      resolve({ code, stdout: Buffer.concat(out), ms: performance.now() - t0 });
    });
    if (open) child.stdin.write(stdin);
    else child.stdin.end(stdin);
  });
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe(
  'the shim contract vectors against the built binary',
  { skip: !existsSync(SHIM_EXE) && `${SHIM_EXE} is not built` },
  () => {
    let n = 0;
    for (const v of file.vectors) {
      it(v.name, { skip: v.goOnly ?? false, timeout: 30_000 }, async () => {
        const dir = join(env.dir, `v${n++}`);
        mkdirSync(dir);
        const paths = {
          '@SOCKET@': join(dir, 's.sock'),
          '@SPOOL@': join(dir, 'spool'),
          '@BADSPOOL@': join(dir, 'file'),
        };
        writeFileSync(paths['@BADSPOOL@'], '');
        const subst = (s: string) => s.replace(/@(SOCKET|SPOOL|BADSPOOL)@/g, (m) => paths[m as keyof typeof paths]);
        const substRe = (s: string) =>
          s.replace(/@(SOCKET|SPOOL|BADSPOOL)@/g, (m) => escapeRe(paths[m as keyof typeof paths]));
        const daemon = await fakeDaemon(paths['@SOCKET@'], v.reply);
        try {
          const vars: Record<string, Buffer> = {};
          for (const [k, g] of Object.entries(v.env)) vars[k] = Buffer.from(subst(gen(g).toString('latin1')), 'latin1');
          const { data, open } = stdinOf(v.stdin, subst);
          const r = await runShim(vars, data, open);
          const stdout = r.stdout.toString('utf8');
          assert.equal(r.code, v.want.exitCode, `exit code; stdout ${stdout}`);
          if (v.want.stdout !== undefined) assert.equal(stdout, subst(v.want.stdout));
          if (v.want.code !== undefined || v.want.msg !== undefined || v.want.cniVersion !== undefined) {
            const e = JSON.parse(stdout) as { cniVersion: string; code: number; msg: string };
            assert.equal(typeof e.cniVersion, 'string');
            if (v.want.code !== undefined) assert.equal(e.code, v.want.code, e.msg);
            if (v.want.cniVersion !== undefined) assert.equal(e.cniVersion, v.want.cniVersion);
            if (v.want.msg !== undefined) assert.match(e.msg, new RegExp(substRe(v.want.msg)));
          }
          if (v.want.msgNot !== undefined) {
            const re = v.want.msgNot.startsWith('(?i)')
              ? new RegExp(v.want.msgNot.slice(4), 'i')
              : new RegExp(v.want.msgNot);
            assert.doesNotMatch(stdout, re);
          }
          if (v.want.maxMs !== undefined) assert.ok(r.ms <= v.want.maxMs, `${r.ms} ms`);
          const sent = v.want.sent;
          if (typeof sent === 'boolean' && v.reply !== 'frozen' && v.reply !== 'unreachable')
            assert.equal(daemon.reqs.length > 0, sent, `requests: ${daemon.reqs.length}`);
          if (typeof sent === 'object') {
            assert.equal(daemon.reqs.length, 1);
            const req = daemon.reqs[0]!;
            const want = JSON.parse(subst(JSON.stringify(sent))) as Exclude<typeof sent, boolean>;
            if (want.method) assert.equal(req.method, want.method);
            if (want.path) assert.equal(req.path, want.path);
            for (const [k, wv] of Object.entries(want.headers ?? {})) assert.equal(req.headers[k], wv ?? undefined, k);
            if (want.body !== undefined) assert.deepEqual(JSON.parse(req.body.toString('utf8')), want.body);
          }
          const spoolDir = paths['@SPOOL@'];
          const files = existsSync(spoolDir) ? readdirSync(spoolDir) : [];
          assert.deepEqual(
            files.filter((f) => f.endsWith('.tmp')),
            [],
            'no temp file left',
          );
          const spooled = v.want.spooled;
          if (typeof spooled === 'boolean') assert.equal(files.length > 0, spooled, files.join(' '));
          if (typeof spooled === 'object') {
            assert.equal(files.length, 1, files.join(' '));
            const m = spoolName.exec(files[0]!);
            assert.ok(m, files[0]);
            assert.equal(m[2], spooled.containerId);
            assert.equal(statSync(join(spoolDir, files[0]!)).mode & 0o777, 0o600);
            if (spooled.body !== undefined)
              assert.deepEqual(
                JSON.parse(readFileSync(join(spoolDir, files[0]!), 'utf8')),
                JSON.parse(subst(JSON.stringify(spooled.body))),
              );
          }
        } finally {
          await daemon.close();
        }
      });
    }
  },
);
