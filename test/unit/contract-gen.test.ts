// The shim's contract constants (shim/contract_gen.go) are generated from the TypeScript modules
// (scripts/gen-contract.ts): the committed file must be exactly what the generator renders now, and
// no other Go file of the shim may declare one of its names by hand (a second source).

import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { GO_FILE, HEADER, docComment, renderContractGo } from '../../scripts/gen-contract.js';

const REPO = new URL('../..', import.meta.url).pathname;

/** The names a Go file declares at its top level as constants or variables (in blocks or alone). */
function declaredNames(text: string): string[] {
  const names: string[] = [];
  let block: 'const' | 'var' | undefined;
  for (const line of text.split('\n')) {
    if (/^(const|var) \($/.test(line)) block = line.startsWith('const') ? 'const' : 'var';
    else if (line === ')') block = undefined;
    else if (block && /^\t[A-Za-z_]\w*(\s|$)/.test(line)) names.push(line.trim().split(/\s/)[0] as string);
    else {
      const m = /^(?:const|var) ([A-Za-z_]\w*)\b/.exec(line);
      if (m) names.push(m[1] as string);
    }
  }
  return names;
}

describe('shim/contract_gen.go', () => {
  const rendered = renderContractGo();

  test('is what scripts/gen-contract.ts renders from the TypeScript sources', () => {
    const committed = readFileSync(join(REPO, GO_FILE), 'utf8');
    assert.ok(committed === rendered, `${GO_FILE} is stale: run npm run gen:contract`);
  });

  test('says it is generated, in the form Go tools recognise', () => {
    assert.match(rendered.split('\n')[0] as string, /^\/\/ Code generated .* DO NOT EDIT\.$/);
    assert.equal(rendered.split('\n')[0], HEADER);
  });

  test('no other Go file of the shim declares a generated name by hand', () => {
    const generated = new Set(declaredNames(rendered));
    assert.ok(generated.has('maxNetconfBytes') && generated.has('codeVersionSkew') && generated.has('cniCommands'));
    const shim = join(REPO, 'shim');
    const twice = readdirSync(shim)
      .filter((f) => f.endsWith('.go') && join('shim', f) !== GO_FILE)
      .flatMap((f) =>
        declaredNames(readFileSync(join(shim, f), 'utf8'))
          .filter((n) => generated.has(n))
          .map((n) => `${f}: ${n}`),
      );
    assert.deepEqual(twice, []);
  });

  test('the values and the doc comments come from the TypeScript sources', () => {
    assert.match(rendered, /\n\tdelBound = 30 \* time\.Second\n/);
    assert.match(rendered, /\n\tstatusBound = 750 \* time\.Millisecond\n/);
    assert.match(rendered, /\n\tmaxRequestBytes = 1088 \* 1024\n/);
    const doc = docComment('shared/src/api.ts', 'MAX_SOCKET_PATH_BYTES');
    assert.ok(doc?.startsWith("A Unix socket path's longest length in bytes"), doc);
    assert.equal(docComment('shared/src/api.ts', 'DEFAULT_SOCKET'), undefined);
    assert.throws(() => docComment('shared/src/api.ts', 'NO_SUCH_CONSTANT'), /no exported const/);
  });
});
