// The netconf examples operators copy from the docs must work as written: a steward entry that
// wraps a delegate using a capability must declare it too, or the runtime never passes it.

import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

/** Reference plugins that do nothing useful unless the runtime passes them this capability. */
const NEEDS: Record<string, string> = { portmap: 'portMappings', bandwidth: 'bandwidth' };

const REPO = new URL('../..', import.meta.url).pathname;
const files = [
  'README.md',
  'deploy/README.md',
  ...readdirSync(join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

function stewardEntries(value: unknown, out: Record<string, any>[] = []): Record<string, any>[] {
  if (Array.isArray(value)) for (const v of value) stewardEntries(v, out);
  else if (typeof value === 'object' && value !== null) {
    const o = value as Record<string, any>;
    if (o.type === 'steward' && Array.isArray(o.delegates)) out.push(o);
    for (const v of Object.values(o)) stewardEntries(v, out);
  }
  return out;
}

test('every steward entry in a JSON example declares the capabilities its delegates use', () => {
  let checked = 0;
  for (const file of files) {
    const text = readFileSync(join(REPO, file), 'utf8');
    for (const [, block] of text.matchAll(/```json\n([\s\S]*?)```/g)) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(block!);
      } catch {
        continue;
      }
      for (const entry of stewardEntries(parsed)) {
        checked++;
        for (const d of entry.delegates) {
          for (const p of d.plugins ?? [d]) {
            const need = NEEDS[p.type];
            if (need) assert.equal(p.capabilities?.[need], true, `${file}: ${p.type} must declare capability ${need}`);
            for (const [cap, on] of Object.entries(p.capabilities ?? {})) {
              if (on === true)
                assert.equal(
                  entry.capabilities?.[cap],
                  true,
                  `${file}: steward entry lacks capability ${cap} that ${p.type} declares`,
                );
            }
          }
        }
      }
    }
  }
  assert.ok(checked >= 1, 'the README example was found and checked');
});
