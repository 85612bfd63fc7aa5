// The shim for every kind of node (scripts/build-shims.mjs): each binary is built from its target's
// Bun runtime package on the npm registry and is checked with `file` for its architecture and ELF
// interpreter (which names the libc). Only the x64 glibc one can run here: it answers a VERSION
// call with no Node.js reachable. The others are built, not run (no arm64 CPU, no musl loader).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO, TestEnv } from '../helpers/env.js';

const EXPECT: Record<string, { arch: RegExp; interpreter: string }> = {
  'linux-x64': { arch: /ELF 64-bit LSB .*x86-64/, interpreter: '/lib64/ld-linux-x86-64.so.2' },
  'linux-x64-musl': { arch: /ELF 64-bit LSB .*x86-64/, interpreter: '/lib/ld-musl-x86_64.so.1' },
  'linux-arm64': { arch: /ELF 64-bit LSB .*ARM aarch64/, interpreter: '/lib/ld-linux-aarch64.so.1' },
  'linux-arm64-musl': { arch: /ELF 64-bit LSB .*ARM aarch64/, interpreter: '/lib/ld-musl-aarch64.so.1' },
};

const env = new TestEnv('shim-targets');
const skip =
  process.platform !== 'linux' || process.arch !== 'x64' ? 'builds and runs x64 binaries on linux only' : false;

describe('shim binaries for every node: x64, x64 musl, arm64, arm64 musl', { skip }, () => {
  const out = join(env.dir, 'shims');
  let built: Array<{ target: string; path: string; bytes: number; file: string }> = [];

  it(
    'build-shims makes one per target from the Bun runtime packages, each for its CPU and libc',
    { timeout: 600_000 },
    () => {
      const stdout = execFileSync(process.execPath, [join(REPO, 'scripts/build-shims.mjs'), '--out', out], {
        encoding: 'utf8',
        timeout: 600_000,
      });
      built = stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      assert.deepEqual(built.map((b) => b.target).sort(), Object.keys(EXPECT).sort());
      for (const b of built) {
        const e = EXPECT[b.target]!;
        assert.match(b.file, e.arch, b.target);
        assert.ok(b.file.includes(`interpreter ${e.interpreter}`), `${b.target}: ${b.file}`);
        assert.equal(statSync(b.path).size, b.bytes);
        // Nearly all of it is the Bun runtime; the shim's own bundle is a few KiB of it.
        assert.ok(b.bytes > 50_000_000 && b.bytes < 200_000_000, `${b.target}: ${b.bytes} bytes`);
        process.stderr.write(`shim ${b.target}: ${b.bytes} bytes, ${b.file.split(', BuildID')[0]}\n`);
      }
    },
  );

  it('the x64 glibc binary runs here and answers VERSION (no Node involved)', () => {
    const x64 = built.find((b) => b.target === 'linux-x64');
    assert.ok(x64, 'built');
    const r = spawnSync(x64.path, [], {
      input: '{"cniVersion":"1.0.0"}',
      env: { CNI_COMMAND: 'VERSION', PATH: '/nonexistent' },
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(JSON.parse(r.stdout).supportedVersions.includes('1.0.0'));
  });

  it('neither dist/steward nor the x64 binary reads bunfig.toml (preload scripts) or .env from its working directory', () => {
    // The runtime runs the shim as root in a directory of its choosing. By default a compiled Bun
    // executable would run bunfig.toml's `preload` scripts from there and load .env into its env.
    const cwd = join(env.dir, 'cwd');
    mkdirSync(cwd);
    const marker = join(env.dir, 'preloaded');
    writeFileSync(join(cwd, 'bunfig.toml'), 'preload = ["./evil.js"]\n');
    writeFileSync(join(cwd, 'evil.js'), `require("node:fs").writeFileSync(${JSON.stringify(marker)}, "ran");\n`);
    writeFileSync(join(cwd, '.env'), 'CNI_COMMAND=VERSION\n');
    const x64 = built.find((b) => b.target === 'linux-x64');
    assert.ok(x64, 'built');
    for (const bin of [x64.path, join(REPO, 'dist/steward')]) {
      // No CNI_COMMAND in the environment: only a .env could make this a VERSION call.
      const r = spawnSync(bin, [], {
        cwd,
        input: '{"cniVersion":"1.0.0"}',
        env: { PATH: '/nonexistent' },
        encoding: 'utf8',
      });
      assert.notEqual(r.status, 0, `${bin} took CNI_COMMAND from .env: ${r.stdout}`);
      assert.match(r.stdout, /CNI_COMMAND/, `${bin}: ${r.stdout}`);
      assert.equal(existsSync(marker), false, `${bin} ran bunfig.toml's preload script`);
    }
  });

  it('cleans up', async () => {
    await env.close();
  });
});
