// The audit runner's pure helpers: the grace syntax, the dataDirs read from journalled plugin configs,
// and the host-local config an unjournalled lease's DEL is given (host-local refuses host bits set).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { hostLocalDataDirs, hostLocalDelConfig } from '../../daemon/src/audit/leases.js';
import { parseDuration } from '../../daemon/src/audit/options.js';
import type { Finding } from '../../daemon/src/audit/decide.js';
import { parseCap, parseCapFraction, parseDeadline, parseRuntimeEndpoint } from '../../daemon/src/audit/options.js';

const lease = (ip: string): Finding => ({
  kind: 'lease',
  containerId: 'c1',
  network: 'cbr0',
  ifname: 'eth0',
  ip,
  path: `/var/lib/cni/networks/cbr0/${ip}`,
  mtimeMs: 0,
  journalled: false,
});

describe('audit run helpers', () => {
  it('parses graces and refuses what is not one', () => {
    assert.equal(parseDuration('90s'), 90_000);
    assert.equal(parseDuration('15m'), 900_000);
    assert.equal(parseDuration('1h30m'), 5_400_000);
    assert.equal(parseDuration('250ms'), 250);
    for (const bad of ['', 'soon', '15', '-1m', '1d', 'm']) assert.equal(parseDuration(bad), undefined, bad);
  });

  it('parses fractional durations, rounded to the millisecond', () => {
    assert.equal(parseDuration('1.5m'), 90_000);
    assert.equal(parseDuration('0.0015s'), 2);
    assert.equal(parseDuration('2h0.5s'), 7_200_500);
    for (const bad of ['1.m', '.5m', '1m ', ' 1m', '1M', '1h-5m']) assert.equal(parseDuration(bad), undefined, bad);
  });

  it('parses a per-network fraction above 0 and at most 1, six decimals at most', () => {
    assert.equal(parseCapFraction('0.5'), 0.5);
    assert.equal(parseCapFraction('1'), 1);
    assert.equal(parseCapFraction('1.000000'), 1);
    assert.equal(parseCapFraction('0.000001'), 0.000001);
    for (const bad of [
      '0',
      '0.0',
      '0.000000',
      '1.5',
      '1.000001',
      '2',
      '.5',
      '0.5x',
      'x0.5',
      '0.0000001',
      '-0.5',
      '',
      '1e-1',
    ])
      assert.equal(parseCapFraction(bad), undefined, bad);
  });

  it('parses a pass deadline from 1s to 596h and refuses the rest', () => {
    assert.equal(parseDeadline('1s'), 1000);
    assert.equal(parseDeadline('5m'), 300_000);
    assert.equal(parseDeadline('596h'), 596 * 3_600_000);
    for (const bad of ['999ms', '0s', '596h1ms', '600h', 'soon', '']) assert.equal(parseDeadline(bad), undefined, bad);
  });

  it('parses release caps from 0 to 1000000 and refuses the rest', () => {
    assert.equal(parseCap('0'), 0);
    assert.equal(parseCap('1000'), 1000);
    assert.equal(parseCap('1000000'), 1_000_000);
    for (const bad of ['', '-1', '1.5', 'x', '1e3', '1000001', ' 5', '0x10'])
      assert.equal(parseCap(bad), undefined, bad);
  });

  it('parses runtime endpoints as crictl writes them, and a bare absolute path; refuses the rest', () => {
    assert.equal(parseRuntimeEndpoint('unix:///run/containerd/containerd.sock'), '/run/containerd/containerd.sock');
    assert.equal(parseRuntimeEndpoint('/var/run/crio/crio.sock'), '/var/run/crio/crio.sock');
    for (const bad of ['', 'unix://run/x.sock', 'run/x.sock', 'tcp://127.0.0.1:1234', 'unix:///a\0b'])
      assert.equal(parseRuntimeEndpoint(bad), undefined, bad);
  });

  it('reads host-local dataDirs as ipam or as the plugin itself', () => {
    assert.deepEqual(hostLocalDataDirs('{"type":"bridge","ipam":{"type":"host-local","dataDir":"/d1"}}'), ['/d1']);
    assert.deepEqual(hostLocalDataDirs('{"type":"host-local","dataDir":"/d2"}'), ['/d2']);
    assert.deepEqual(hostLocalDataDirs('{"type":"bridge","ipam":{"type":"dhcp","dataDir":"/x"}}'), []);
    assert.deepEqual(hostLocalDataDirs('not json'), []);
    // Neither a dataDir that is not a string, nor one of a plugin that is not host-local.
    assert.deepEqual(hostLocalDataDirs('{"type":"bridge","ipam":{"type":"host-local"}}'), []);
    assert.deepEqual(hostLocalDataDirs('{"type":"bridge","ipam":{"type":"host-local","dataDir":5}}'), []);
    assert.deepEqual(hostLocalDataDirs('{"type":"bridge","dataDir":"/d3"}'), []);
    assert.deepEqual(hostLocalDataDirs('{"type":"host-local"}'), []);
  });

  it("gives host-local the lease's network, dataDir and a range without host bits", () => {
    const v4 = hostLocalDelConfig(lease('10.77.3.10'));
    assert.equal(v4.name, 'cbr0');
    assert.deepEqual(v4.ipam, {
      type: 'host-local',
      dataDir: '/var/lib/cni/networks',
      ranges: [[{ subnet: '10.77.3.0/24' }]],
    });
    const subnet = (ip: string) =>
      ((hostLocalDelConfig(lease(ip)).ipam as { ranges: Array<Array<{ subnet: string }>> }).ranges[0] ?? [])[0]?.subnet;
    assert.equal(subnet('fd00:10:1::5'), 'fd00:10:1:0::/64');
    assert.equal(subnet('fd00:1:2:3:4:5:6:7'), 'fd00:1:2:3::/64');
    assert.equal(subnet('::1'), '0:0:0:0::/64');
    assert.equal(subnet('::'), '0:0:0:0::/64');
    assert.equal(subnet('fd00::'), 'fd00:0:0:0::/64');
    assert.equal(subnet('fd00::1:2:3:4:5'), 'fd00:0:0:1::/64');
    assert.equal(subnet('fd00:a:b::1:2:3:4'), 'fd00:a:b:0::/64');
    assert.equal(v4.cniVersion, '0.4.0');
    assert.equal(v4.type, 'host-local');
  });
});
