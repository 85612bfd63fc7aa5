// The image the DaemonSet pod test (test/e2e/image/pod.test.ts) runs, in a container storage of
// that test's own: built from the Dockerfile by scripts/build-image.sh, or copied from an image
// already in the machine's storage (STEWARD_POD_IMAGE).

import { spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from '../env.js';
import { run, type Ran } from '../runtimes/exec.js';

/** A podman storage of the test's own (--root, --runroot, --tmpdir). */
export interface PodmanStorage {
  root: string;
  runroot: string;
  tmp: string;
}

/** podman on that storage. */
export function podmanIn(storage: PodmanStorage): (args: string[], timeoutMs?: number) => Promise<Ran> {
  return (args, timeoutMs = 300_000) =>
    run('podman', ['--root', storage.root, '--runroot', storage.runroot, '--tmpdir', storage.tmp, ...args], {
      timeoutMs,
    });
}

/** The image, in the test's own storage: built from the Dockerfile, or copied from STEWARD_POD_IMAGE. */
export async function provideImage(storage: PodmanStorage, image: string, dir: string): Promise<string> {
  const pcmd = podmanIn(storage);
  for (const d of [storage.root, storage.runroot, storage.tmp]) mkdirSync(d, { recursive: true });
  const t0 = Date.now();
  const given = process.env.STEWARD_POD_IMAGE;
  if (given) {
    const archive = join(dir, 'image.tar');
    const s = await run('podman', ['save', '--format', 'oci-archive', '-o', archive, given], { timeoutMs: 300_000 });
    if (s.code !== 0) throw new Error(`podman save ${given}: ${s.stderr}`);
    const l = await pcmd(['load', '-i', archive]);
    if (l.code !== 0) throw new Error(`podman load: ${l.stderr}`);
    const loaded = /Loaded image(?:\(s\))?: *(\S+)/.exec(l.stdout)?.[1];
    if (!loaded) throw new Error(`podman load said: ${l.stdout}`);
    const t = await pcmd(['tag', loaded, image]);
    if (t.code !== 0) throw new Error(`podman tag: ${t.stderr}`);
    rmSync(archive, { force: true });
    return `copied ${given} in ${((Date.now() - t0) / 1000).toFixed(0)} s`;
  }
  const report = join(dir, 'build-report.jsonl');
  const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
    {
      const child = spawn('bash', [join(REPO, 'scripts/build-image.sh'), image], {
        env: {
          ...process.env,
          STEWARD_STORAGE_ROOT: storage.root,
          STEWARD_STORAGE_RUNROOT: storage.runroot,
          STEWARD_BUILD_REPORT: report,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (b: Buffer) => {
        out += b.toString();
      });
      child.stderr.on('data', (b: Buffer) => {
        out += b.toString();
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), 45 * 60_000);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, out });
      });
    }
  });
  if (r.code !== 0)
    throw new Error(
      `scripts/build-image.sh exited ${r.code}:\n${r.out
        .split('\n')
        .filter((l) => !l.includes('npm warn Unknown'))
        .slice(-40)
        .join('\n')}`,
    );
  // The figures the docs quote: how long the base and the build took, and each layer's size.
  process.stderr.write(
    `\n${r.out
      .split('\n')
      .filter((l) => l.startsWith('build-image:'))
      .join('\n')}\n`,
  );
  return `built in ${((Date.now() - t0) / 1000).toFixed(0)} s`;
}
