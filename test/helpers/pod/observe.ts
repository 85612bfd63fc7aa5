// How the DaemonSet pod test (test/e2e/image/pod.test.ts) looks at the node from outside the pod:
// file trees by sha256 (to prove byte-identical), GETs on the daemon's socket, polling with a
// deadline, and a CNI plugin run as a runtime runs it.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';

/** A file tree as path -> sha256 / symlink target / 'dir', to compare bytes before and after. */
export function tree(dir: string): Record<string, string> | null {
  if (!existsSync(dir)) return null;
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d).sort()) {
      const p = join(d, e);
      const st = lstatSync(p);
      if (st.isDirectory()) {
        out[p] = `dir ${st.mode.toString(8)}`;
        walk(p);
      } else if (st.isSymbolicLink()) out[p] = `-> ${readlinkSync(p)}`;
      else out[p] = `${st.mode.toString(8)} ${createHash('sha256').update(readFileSync(p)).digest('hex')}`;
    }
  };
  walk(dir);
  return out;
}

export function sha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** GET on a Unix socket; the body parsed as JSON when it is JSON. */
export function getSocket(socket: string, path: string): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket, path, method: 'GET', timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = text;
        }
        resolve({ status: res.statusCode ?? 0, json });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** Polls `cond` (a throw counts as false) every 500 ms until the deadline; fails naming `what`. */
export async function waitFor(what: string, cond: () => Promise<boolean> | boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (
      await Promise.resolve()
        .then(cond)
        .catch(() => false)
    )
      return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** Runs a CNI plugin as a runtime does: netconf on stdin, CNI_* in a trimmed environment. */
export function callShim(
  bin: string,
  stdin: string,
  cniEnv: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const c = spawn(bin, [], {
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...cniEnv },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    c.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
    });
    c.stderr.on('data', (b: Buffer) => {
      stderr += b.toString();
    });
    const timer = setTimeout(() => c.kill('SIGKILL'), 180_000);
    c.on('error', reject);
    c.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    c.stdin.end(stdin);
  });
}
