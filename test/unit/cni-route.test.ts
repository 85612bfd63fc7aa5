// The one matcher of the CNI route (daemon/src/routes/cni-route.ts, issue 28 item 4): which request
// targets are the route exactly, another spelling of it, or another route; and the route's own
// handler refusing any target but the exact one, whatever reaches it past the admission path.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cniTarget } from '../../daemon/src/routes/cni-route.js';
import { buildDegradedApp } from '../../daemon/src/server.js';
import { silentLog } from '../helpers/engine-fakes.js';

describe('the CNI route matcher', () => {
  test('only /v1/cni itself is the exact target', () => {
    assert.equal(cniTarget('/v1/cni'), 'exact');
  });

  test('every spelling the router could map to the route is a variant', () => {
    for (const url of [
      '/v1/cni?x=1',
      '/v1/cni?',
      '/v1/cni#f',
      '/v1/cni;x',
      '/v1/%63ni',
      '/v1/%2563ni',
      '/v1%2Fcni',
      '/%76%31/%63%6e%69',
      'http://localhost/v1/cni',
      'HTTPS://a@b:1/v1/cni?x',
      'unix://x/v1/cni',
      '/v1/cni/',
      '/v1/cni//',
      '//v1/cni',
      '/v1//cni',
      '/V1/Cni',
    ])
      assert.equal(cniTarget(url), 'variant', url);
  });

  test('other routes, and targets that only look alike, are other', () => {
    for (const url of [undefined, '/v1/status', '/v1/cni2', '/v1/cnix?y', '/v1', '/', '/v1/cni/x', '%', '/v1/%zz'])
      assert.equal(cniTarget(url), 'other', String(url));
  });
});

describe("the CNI route's handler", () => {
  const spoolDir = mkdtempSync(join(tmpdir(), 'steward-route-'));
  after(() => rmSync(spoolDir, { recursive: true, force: true }));

  test('refuses a variant that reaches it without the admission path (the degraded app has none)', async () => {
    const app = buildDegradedApp({
      reason: 'test',
      problems: [],
      spoolDir,
      version: '0',
      startedAt: Date.now(),
      log: silentLog,
    });
    try {
      const body = { env: { CNI_COMMAND: 'DEL', CNI_CONTAINERID: 'c', CNI_IFNAME: 'eth0' }, config: {} };
      // (inject turns an absolute target into its path and drops a fragment; cni-route-forms.test.ts sends them raw.)
      for (const url of ['/v1/cni?x=1', '/v1/%63ni', '/v1/c%6Ei?']) {
        const r = await app.inject({ method: 'POST', url, payload: body });
        assert.equal(r.statusCode, 400, `${url}: ${r.body}`);
        assert.equal(r.json().code, 6, url);
        assert.match(r.json().msg, /the CNI route is exactly POST \/v1\/cni/);
      }
    } finally {
      await app.close();
    }
  });
});
