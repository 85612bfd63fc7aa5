// The shim's contract vectors (shared/vectors/shim.json) run against the built binary
// (dist/steward), as a runtime runs it: env and stdin in, stdout, exit code and the spool out,
// against a Unix socket server that answers as each vector says (an HTTP answer, raw bytes, a
// refused connection, a frozen daemon; or one of those per request, in order), with the spool made
// unwritable where a vector says it fails. go test runs the same vectors through the Go logic
// in-process (shim/vectors_test.go); this is the built binary's turn. Vectors marked goOnly need an
// injected clock and are skipped here. Vectors are read by test/helpers/shim-vectors.ts.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { REPO, TestEnv } from '../helpers/env.js';
import { skipOrFail } from '../helpers/runtimes/skip.js';
import {
  type HttpReply,
  type Vector,
  gen,
  loadVectors,
  replyList,
  sentList,
  spoolNamePattern,
  stdinOf,
} from '../helpers/shim-vectors.js';

const SHIM_EXE = join(REPO, 'dist/steward');

const file = loadVectors();
const spoolName = spoolNamePattern();

const env = new TestEnv('shim-vectors');
after(() => env.close());

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
  const replies = replyList(reply);
  const held: Socket[] = [];
  let connections = 0;
  const server: Server = createServer((c) => {
    held.push(c);
    c.on('error', () => undefined);
    const r = replies[Math.min(connections++, replies.length - 1)]!;
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
      if (r === 'frozen') return; // read, never answered
      const a: HttpReply = r === 'none' ? { status: 200, body: '{"cniVersion":"1.0.0"}', protocol: '2' } : r;
      if (a.raw !== undefined) {
        c.end(Buffer.from(a.raw, 'latin1'));
        return;
      }
      const body = Buffer.from(a.body ?? '', 'utf8');
      c.end(
        Buffer.concat([
          Buffer.from(
            `HTTP/1.1 ${a.status} X\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n` +
              (a.protocol !== undefined ? `x-steward-protocol: ${a.protocol}\r\n` : '') +
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
  {
    // Skip-or-fail: a CI run (STEWARD_E2E_REQUIRE=1) without the built shim fails here, saying so.
    skip: skipOrFail(
      'the shim contract vectors against the built binary',
      existsSync(SHIM_EXE) ? undefined : `${SHIM_EXE} is not built (npm run build, with Go 1.26+)`,
    ),
  },
  () => {
    let n = 0;
    for (const v of file.vectors) {
      it(v.name, { skip: v.goOnly ?? false, timeout: 30_000 }, async () => {
        const dir = join(env.dir, `v${n++}`);
        mkdirSync(dir);
        const paths = { '@SOCKET@': join(dir, 's.sock'), '@SPOOL@': join(dir, 'spool') };
        assert.ok(v.spool === undefined || v.spool === 'fails', `spool ${String(v.spool)}: only "fails" is known`);
        // A regular file where the spool dir should be: nothing can be written under it.
        if (v.spool === 'fails') writeFileSync(paths['@SPOOL@'], '');
        const subst = (s: string) => s.replace(/@(SOCKET|SPOOL)@/g, (m) => paths[m as keyof typeof paths]);
        const substRe = (s: string) => s.replace(/@(SOCKET|SPOOL)@/g, (m) => escapeRe(paths[m as keyof typeof paths]));
        const daemon = await fakeDaemon(paths['@SOCKET@'], v.reply);
        try {
          const vars: Record<string, Buffer> = {};
          for (const [k, g] of Object.entries(v.env)) vars[k] = Buffer.from(subst(gen(g).toString('latin1')), 'latin1');
          const { data, open } = stdinOf(file, v.stdin, subst);
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
          const listed = sentList(sent);
          if (listed) {
            // One request (an object) or exactly that many (a list), each checked alike.
            const wants = JSON.parse(subst(JSON.stringify(listed))) as typeof listed;
            assert.equal(daemon.reqs.length, wants.length, 'requests');
            wants.forEach((want, i) => {
              const req = daemon.reqs[i]!;
              if (want.method) assert.equal(req.method, want.method, `request ${i}`);
              if (want.path) assert.equal(req.path, want.path, `request ${i}`);
              for (const [k, wv] of Object.entries(want.headers ?? {}))
                assert.equal(req.headers[k], wv ?? undefined, `request ${i}: ${k}`);
              if (want.body !== undefined)
                assert.deepEqual(JSON.parse(req.body.toString('utf8')), want.body, `request ${i}`);
            });
          }
          const spoolDir = paths['@SPOOL@'];
          if (v.spool === 'fails') {
            assert.ok(lstatSync(spoolDir).isFile(), 'the spool dir that cannot be made was replaced');
            assert.ok(v.want.spooled === undefined || v.want.spooled === false, 'want.spooled with spool "fails"');
          }
          const files = existsSync(spoolDir) && v.spool !== 'fails' ? readdirSync(spoolDir) : [];
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
