// avoidExitHang: concurrent Sparkplug off under Node, nothing under Bun (shared/src/exit-hang.ts).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { avoidExitHang } from '../../shared/src/exit-hang.js';
import { REPO } from '../helpers/env.js';

describe('avoidExitHang', () => {
  it('sets --no-concurrent-sparkplug through node:v8 under Node, and touches nothing under Bun', (t) => {
    const flags: string[] = [];
    const asked: string[] = [];
    const real = process.getBuiltinModule;
    t.mock.method(process, 'getBuiltinModule', ((id: string) => {
      asked.push(id);
      return id === 'node:v8' ? { setFlagsFromString: (f: string) => flags.push(f) } : real(id);
    }) as typeof process.getBuiltinModule);
    avoidExitHang();
    assert.deepEqual(asked, ['node:v8']);
    assert.deepEqual(flags, ['--no-concurrent-sparkplug']);
    const versions = process.versions as Record<string, string | undefined>;
    versions.bun = '1.3.0';
    try {
      avoidExitHang();
    } finally {
      delete versions.bun;
    }
    assert.deepEqual(flags, ['--no-concurrent-sparkplug'], 'no call under Bun');
  });

  it('every Node entry point calls it before its work: stewardd and its spawner (the shim is Go)', () => {
    // Each built entry runs with a getBuiltinModule hook that reports each flag set, in order, and ends
    // the process right after the code that set the first. The spawner also keeps its heap small
    // (--optimize-for-size, plugins/spawner-child.ts), after avoidExitHang; stewardd sets nothing else.
    const hook = join(REPO, 'test/fixtures/report-v8-flags.mjs');
    const expected: Record<string, string[]> = {
      'bin/stewardd': ['--no-concurrent-sparkplug'],
      'daemon/dist/plugins/spawner-child.js': ['--no-concurrent-sparkplug', '--optimize-for-size'],
    };
    for (const [entry, flags] of Object.entries(expected)) {
      const r = spawnSync(process.execPath, ['--import', hook, join(REPO, entry), 'version'], {
        input: '',
        env: { ...process.env, CNI_COMMAND: 'VERSION' },
        encoding: 'utf8',
        timeout: 20_000,
      });
      // Only the hook's lines: a Node warning (NODE_OPTIONS, say) may come first and is not the point.
      const set = r.stderr
        .split('\n')
        .filter((l) => l.startsWith('v8 flags set: '))
        .map((l) => l.slice('v8 flags set: '.length));
      assert.deepEqual(set, flags, `${entry}: ${r.stderr}`);
    }
  });
});
