// The audit's own evidence against a runtime's word (issue 28): the node's addresses as /proc shows
// them, read into one comparable form; sightings that make passes the grace apart agree before a
// finding the node cannot prove unused is released, kept in the journal across a restart.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pino } from 'pino';
import {
  canonicalIp,
  parseFibTrieLocal,
  parseIfInet6,
  resultAddresses,
  storedResultAddresses,
} from '../../daemon/src/audit/addresses.js';
import { collectNodeAddresses, NOT_HOST_PID_NS, type NodeAddresses } from '../../daemon/src/audit/node-addresses.js';
import { parseNsMounts } from '../../daemon/src/audit/ns-mounts.js';
import { runAudit, type AuditDeps } from '../../daemon/src/audit/run.js';
import { runtimeDistrust } from '../../daemon/src/audit/decide.js';
import { Store } from '../../daemon/src/store/store.js';

const dir = mkdtempSync(join(tmpdir(), 'stw-audit-proof-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const HOUR = 3600_000;
const id = (c: string) => c.repeat(64);

const FIB = `Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.88.0.0/16 2 0 2
        |-- 10.88.0.0
           /16 link UNICAST
        |-- 10.88.0.7
           /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 10.88.0.7
        /32 host LOCAL
     |-- 10.88.255.255
        /32 link BROADCAST
     |-- 127.0.0.1
        /32 host LOCAL
`;
const INET6 = `fd00000000000000000000000000000a 02 40 00 80     eth0
00000000000000000000000000000001 01 80 10 80       lo
`;

describe("the node's addresses", () => {
  it('fib_trie gives the local addresses only (not networks, not broadcasts)', () => {
    assert.deepEqual(parseFibTrieLocal(FIB).sort(), ['10.88.0.7', '127.0.0.1']);
  });

  it('if_inet6 gives every IPv6 address, in the canonical form leases and results are compared in', () => {
    assert.deepEqual(parseIfInet6(INET6), [
      'fd00:0000:0000:0000:0000:0000:0000:000a',
      '0000:0000:0000:0000:0000:0000:0000:0001',
    ]);
    assert.equal(canonicalIp('fd00::a'), 'fd00:0000:0000:0000:0000:0000:0000:000a');
    assert.equal(canonicalIp('FD00:0:0::A/64'), 'fd00:0000:0000:0000:0000:0000:0000:000a');
    assert.equal(canonicalIp('::ffff:10.0.0.1'), '0000:0000:0000:0000:0000:ffff:0a00:0001');
    assert.equal(canonicalIp('10.1.2.3/24'), '10.1.2.3');
    assert.equal(canonicalIp('not an ip'), null);
  });

  it("a result's addresses, 0.3.0 and later and 0.2.0 alike", () => {
    assert.deepEqual(resultAddresses({ ips: [{ address: '10.1.0.5/24' }, { address: 'fd00::5/64' }] }), [
      '10.1.0.5',
      'fd00:0000:0000:0000:0000:0000:0000:0005',
    ]);
    assert.deepEqual(resultAddresses({ ip4: { ip: '10.2.0.9/16' } }), ['10.2.0.9']);
    assert.deepEqual(resultAddresses(null), []);
  });

  it('one read per namespace through /proc, however many processes share it', async () => {
    const proc = join(dir, 'proc');
    // Two processes in one namespace, one in another; a fake /proc with their links and files.
    for (const [pid, ns, addr] of [
      ['1', '4026531840', '192.0.2.1'],
      ['7', '4026531840', '192.0.2.1'],
      ['42', '4026532001', '10.88.0.7'],
    ] as const) {
      mkdirSync(join(proc, pid, 'ns'), { recursive: true });
      mkdirSync(join(proc, pid, 'net'), { recursive: true });
      symlinkSync(`net:[${ns}]`, join(proc, pid, 'ns', 'net'));
      writeFileSync(join(proc, pid, 'net', 'fib_trie'), `Local:\n  |-- ${addr}\n     /32 host LOCAL\n`);
    }
    const read: string[] = [];
    const out = await collectNodeAddresses({
      proc,
      netnsDirs: [join(dir, 'no-netns-dir')],
      readInNetns: async (p) => {
        read.push(p);
        return '';
      },
    });
    assert.deepEqual([...out.addresses].sort(), ['10.88.0.7', '192.0.2.1']);
    assert.equal(out.namespaces, 2);
    assert.deepEqual(out.unread, []);
    assert.deepEqual(read, [], 'no namespace to enter');
  });
});

describe("the node's namespaces: what counts as read", () => {
  let n = 0;
  /** A fake /proc: each pid's ns/net link, and its fib_trie (null: none) and if_inet6. */
  function fakeProc(pids: Array<{ pid: string; ns: string; fib?: string | null; inet6?: string }>): string {
    const proc = join(dir, `proc-${++n}`);
    mkdirSync(proc, { recursive: true });
    for (const p of pids) {
      mkdirSync(join(proc, p.pid, 'ns'), { recursive: true });
      mkdirSync(join(proc, p.pid, 'net'), { recursive: true });
      symlinkSync(p.ns, join(proc, p.pid, 'ns', 'net'));
      if (p.fib !== null) writeFileSync(join(proc, p.pid, 'net', 'fib_trie'), p.fib ?? '');
      if (p.inet6 !== undefined) writeFileSync(join(proc, p.pid, 'net', 'if_inet6'), p.inet6);
    }
    return proc;
  }
  const fib = (a: string) => `Local:\n  |-- ${a}\n     /32 host LOCAL\n`;
  const none = async (): Promise<string> => {
    throw new Error('no namespace to enter');
  };

  it("a namespace whose process's files cannot be read, while the process lives, is a gap in the proof", async () => {
    const proc = fakeProc([
      { pid: '10', ns: 'net:[100]', fib: null },
      { pid: '11', ns: 'net:[200]', fib: fib('10.0.0.2'), inet6: INET6 },
    ]);
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: none });
    assert.deepEqual(out.unread, ['net:[100]']);
    assert.equal(out.namespaces, 1);
    assert.deepEqual([...out.addresses].sort(), [
      '0000:0000:0000:0000:0000:0000:0000:0001',
      '10.0.0.2',
      'fd00:0000:0000:0000:0000:0000:0000:000a',
    ]);
  });

  it('another process in the same namespace serves when the first cannot be read; no fib_trie v6 alone is not enough', async () => {
    const proc = fakeProc([
      { pid: '20', ns: 'net:[300]', fib: null, inet6: INET6 },
      { pid: '21', ns: 'net:[300]', fib: fib('10.0.0.3') },
    ]);
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: none });
    assert.deepEqual(out.unread, []);
    assert.equal(out.namespaces, 1);
    assert.deepEqual([...out.addresses], ['10.0.0.3'], "the second process's files: no if_inet6 there");
  });

  it('entries that are not processes, and links that are not network namespaces, are passed over', async () => {
    const proc = fakeProc([
      { pid: 'self', ns: 'net:[400]', fib: fib('10.0.0.4') },
      { pid: '30', ns: 'mnt:[401]', fib: fib('10.0.0.5') },
      { pid: '31', ns: 'net:[402]', fib: fib('10.0.0.6') },
    ]);
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: none });
    assert.deepEqual([...out.addresses], ['10.0.0.6']);
    assert.equal(out.namespaces, 1);
    assert.deepEqual(out.unread, [], 'what is not a network namespace is no gap either');
    const odd = fakeProc([
      { pid: 'x12', ns: 'net:[410]', fib: fib('10.0.0.11') },
      { pid: '12x', ns: 'net:[411]', fib: fib('10.0.0.12') },
    ]);
    const none2 = await collectNodeAddresses({ proc: odd, netnsDirs: [], readInNetns: none });
    assert.deepEqual(
      none2,
      { addresses: new Set(), namespaces: 0, unread: [] },
      'names not all digits are no processes',
    );
  });

  it('an if_inet6 that is there and cannot be read is a gap, not "no IPv6 addresses"; one that is not there (IPv6 off) is none', async () => {
    const proc = fakeProc([
      { pid: '26', ns: 'net:[320]', fib: fib('10.0.12.4') },
      { pid: '27', ns: 'net:[321]', fib: fib('10.0.12.5') },
    ]);
    mkdirSync(join(proc, '26', 'net', 'if_inet6')); // there, and reading it fails (EISDIR)
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: none });
    assert.deepEqual(out.unread, ['net:[320]']);
    assert.deepEqual([...out.addresses], ['10.0.12.5']);
  });

  it('the first readable process of a namespace serves; one after it that cannot be read is no gap', async () => {
    const proc = fakeProc([
      { pid: '24', ns: 'net:[310]', fib: fib('10.0.12.3') },
      { pid: '25', ns: 'net:[310]', fib: null },
    ]);
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: none });
    assert.deepEqual(out.unread, []);
    assert.deepEqual([...out.addresses], ['10.0.12.3']);
  });

  it('a fib_trie of exactly 16 MiB is still read', async () => {
    const head = fib('10.0.0.9');
    const exact = `${head}${' '.repeat(16 * 1024 * 1024 - head.length - 1)}\n`;
    const proc = fakeProc([{ pid: '42', ns: 'net:[502]', fib: exact }]);
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: none });
    assert.deepEqual(out.unread, []);
    assert.deepEqual([...out.addresses], ['10.0.0.9']);
  });

  it("with no procfs root given it reads the node's own /proc: this process's namespace at least", async () => {
    const out = await collectNodeAddresses({ netnsDirs: [], readInNetns: none });
    assert.ok(out.namespaces >= 1);
    assert.ok(out.addresses.has('127.0.0.1'));
    assert.equal(out.unread.includes(NOT_HOST_PID_NS), false, 'the host PID namespace: PID 2 is kthreadd');
  });

  it('a dangling entry in a netns dir is passed over', async () => {
    const netns = join(dir, `netns-${++n}`);
    mkdirSync(netns);
    symlinkSync(join(dir, 'nothing-here'), join(netns, 'dangling'));
    const out = await collectNodeAddresses({ proc: fakeProc([]), netnsDirs: [netns], readInNetns: none });
    assert.deepEqual(out, { addresses: new Set(), namespaces: 0, unread: [] });
  });

  it('a fib_trie over 16 MiB is not read: its namespace is a gap in the proof', async () => {
    const big = `${fib('10.0.0.7')}${' '.repeat(16 * 1024 * 1024)}\n`;
    const proc = fakeProc([{ pid: '40', ns: 'net:[500]', fib: big }]);
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: none });
    assert.deepEqual(out.unread, ['net:[500]']);
    assert.deepEqual([...out.addresses], []);
  });

  it('a fib_trie over the 1 MiB read buffer is read whole', async () => {
    const pad = `${'  |-- 192.0.2.1\n     /24 link UNICAST\n'.repeat(40_000)}`;
    const proc = fakeProc([{ pid: '41', ns: 'net:[501]', fib: `${pad}${fib('10.0.0.8')}` }]);
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: none });
    assert.deepEqual([...out.addresses], ['10.0.0.8']);
  });

  it('every process is looked at, however many (read 64 links at a time)', async () => {
    const pids = Array.from({ length: 130 }, (_, i) => ({
      pid: String(1000 + i),
      ns: `net:[${9000 + i}]`,
      fib: fib(`10.1.${Math.floor(i / 200)}.${(i % 200) + 1}`),
    }));
    const fds = () => readdirSync('/proc/self/fd').length;
    // A file handle left open is closed by V8's collector when it runs (the pass's 1 MiB read buffers
    // can make it run within the pass), and Node warns that it did: so both are watched.
    const closedByGc: string[] = [];
    const onWarning = (w: Error) => {
      if (/on garbage collection/.test(w.message)) closedByGc.push(w.message);
    };
    process.on('warning', onWarning);
    const before = fds();
    const out = await collectNodeAddresses({ proc: fakeProc(pids), netnsDirs: [], readInNetns: none });
    const after = fds();
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    process.off('warning', onWarning);
    assert.equal(out.namespaces, 130);
    assert.equal(out.addresses.size, 130);
    assert.ok(after <= before + 2, `every file read is closed again (${before} fds before, ${after} after)`);
    assert.deepEqual(closedByGc, [], 'every file read is closed by the pass, not left to the collector');
  });

  it('a bind-mounted namespace no process is in is read inside it; a plain file in the dir is no namespace', async () => {
    // A symlink to this process's own namespace file is an nsfs file, as a bind mount is.
    const netns = join(dir, `netns-${++n}`);
    mkdirSync(netns);
    symlinkSync('/proc/self/ns/net', join(netns, 'pod-a'));
    writeFileSync(join(netns, 'placeholder'), '');
    const entered: string[] = [];
    const out = await collectNodeAddresses({
      proc: fakeProc([]),
      netnsDirs: [netns, netns],
      readInNetns: async (p) => {
        entered.push(p);
        return `${fib('10.88.0.9')}\n${INET6}`;
      },
    });
    assert.deepEqual(entered, [join(netns, 'pod-a')], 'entered once, the placeholder never');
    assert.equal(out.namespaces, 1);
    assert.ok(out.addresses.has('10.88.0.9'));
    assert.ok(out.addresses.has('fd00:0000:0000:0000:0000:0000:0000:000a'));
    assert.deepEqual(out.unread, []);
  });

  it('a bind-mounted namespace a process is in is not entered again', async () => {
    const netns = join(dir, `netns-${++n}`);
    mkdirSync(netns);
    symlinkSync('/proc/self/ns/net', join(netns, 'pod-b'));
    const ino = statSync('/proc/self/ns/net').ino;
    assert.equal(readlinkSync('/proc/self/ns/net'), `net:[${ino}]`);
    const entered: string[] = [];
    const out = await collectNodeAddresses({
      proc: fakeProc([{ pid: '50', ns: `net:[${ino}]`, fib: fib('10.0.0.10') }]),
      netnsDirs: [netns],
      readInNetns: async (p) => {
        entered.push(p);
        return '';
      },
    });
    assert.deepEqual(entered, []);
    assert.equal(out.namespaces, 1);
  });

  it('a namespace that cannot be entered is a gap while it exists; one gone meanwhile (a teardown) is not', async () => {
    const netns = join(dir, `netns-${++n}`);
    mkdirSync(netns);
    symlinkSync('/proc/self/ns/net', join(netns, 'stuck'));
    const stuck = await collectNodeAddresses({ proc: fakeProc([]), netnsDirs: [netns], readInNetns: none });
    assert.deepEqual(stuck.unread, [join(netns, 'stuck')]);
    assert.equal(stuck.namespaces, 0);
    const gone = await collectNodeAddresses({
      proc: fakeProc([]),
      netnsDirs: [netns],
      readInNetns: async (p) => {
        rmSync(p);
        throw new Error('nsenter: no such file');
      },
    });
    assert.deepEqual(gone.unread, []);
  });

  it('a missing /proc or netns dir holds nothing and is no gap', async () => {
    const out = await collectNodeAddresses({
      proc: join(dir, 'no-proc'),
      netnsDirs: [join(dir, 'no-dir')],
      readInNetns: none,
    });
    assert.deepEqual(out, { addresses: new Set(), namespaces: 0, unread: [] });
  });
});

describe('mount tables: the nsfs mounts of /proc/PID/mountinfo', () => {
  it('fields per proc(5): optional fields up to a lone "-", the type after it, escapes decoded, paths as bytes', () => {
    const lines = [
      '22 27 0:21 / /proc rw,relatime - proc proc rw',
      '43 42 0:4 net:[4026532177] /run/netns/a rw shared:2 - nsfs nsfs rw',
      '44 27 0:4 net:[4026532178] /run/user/1000/netns/b rw - nsfs nsfs rw',
      '45 27 0:4 net:[4026532179] /var/run/docker/netns/c\\040d\\134e\\011f\\012g rw shared:3 master:1 propagate_from:1 - nsfs nsfs rw',
      '46 27 0:4 uts:[4026532180] /pinned/uts rw - nsfs nsfs rw',
      '47 27 0:4 mnt:[4026532181] /pinned/mnt rw shared:5 - nsfs nsfs rw',
      '48 27 0:4 / /weird rw - nsfs nsfs rw',
      '49 27 0:4 /net:[4026532182] /weird2 rw - nsfs nsfs rw',
      '50 27 0:4 net:[4026532183]x /weird3 rw - nsfs nsfs rw',
      '51 27 0:45 / /mnt/- rw,nosuid - tmpfs - rw',
      '52 - nsfs nsfs rw',
      '53 27 0:4 net:[4026532184] /nsfs-like rw - nsfsx nsfsx rw',
      // UTF-8 bytes of "café", then a byte that is not UTF-8.
      '54 27 0:4 net:[4026532185] /caf\xc3\xa9 rw - nsfs nsfs rw',
      '55 27 0:4 net:[4026532186] /bad\xff rw - nsfs nsfs rw',
      '',
    ];
    assert.deepEqual(parseNsMounts(Buffer.from(lines.join('\n'), 'latin1')), [
      { kind: 'net', ino: 4026532177, mountPoint: '/run/netns/a' },
      { kind: 'net', ino: 4026532178, mountPoint: '/run/user/1000/netns/b' },
      { kind: 'net', ino: 4026532179, mountPoint: '/var/run/docker/netns/c d\\e\tf\ng' },
      { kind: 'uts', ino: 4026532180, mountPoint: '/pinned/uts' },
      { kind: 'mnt', ino: 4026532181, mountPoint: '/pinned/mnt' },
      { kind: '', ino: 0, mountPoint: '/weird' },
      { kind: '', ino: 0, mountPoint: '/weird2' },
      { kind: '', ino: 0, mountPoint: '/weird3' },
      { kind: 'net', ino: 4026532185, mountPoint: '/café' },
      { kind: 'net', ino: 4026532186, mountPoint: undefined },
    ]);
    assert.deepEqual(parseNsMounts(Buffer.alloc(0)), []);
  });
});

describe("the node's namespaces: every mount of one, in every mount namespace", () => {
  // Real namespace files (nsfs) this process may stat, unprivileged: each a distinct inode. A fake
  // mount table may name any of them as a network namespace; what is entered is what readInNetns says.
  const NET = statSync('/proc/self/ns/net').ino;
  const UTS = statSync('/proc/self/ns/uts').ino;
  const IPC = statSync('/proc/self/ns/ipc').ino;
  const NET_FILE = '/proc/self/ns/net';
  const UTS_FILE = '/proc/self/ns/uts';
  const IPC_FILE = '/proc/self/ns/ipc';
  let n = 0;
  const fib = (a: string) => `Local:\n  |-- ${a}\n     /32 host LOCAL\n`;
  /** A mountinfo line of an nsfs mount of `root` (`net:[N]`) at `mountPoint` (escaped as the kernel escapes). */
  const nsfs = (root: string, mountPoint: string, optional = ' shared:2') =>
    `40 27 0:4 ${root} ${mountPoint} rw${optional} - nsfs nsfs rw`;
  const table = (...lines: string[]) => ['27 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw', ...lines].join('\n');

  interface FakePid {
    pid: string;
    mnt: number;
    /** Its mountinfo (none: unreadable). */
    mountinfo?: string | Buffer;
    /** What its root holds: a path -> the file it links to (a namespace file, or a plain one). */
    root?: Record<string, string>;
    /** A network namespace it is in, with its fib_trie (null: unreadable). */
    net?: { ino: number; fib: string | null };
  }

  function fakeNode(pids: FakePid[]): { proc: string; base: string } {
    const base = join(dir, `node-${++n}`);
    const proc = join(base, 'proc');
    mkdirSync(proc, { recursive: true });
    for (const p of pids) {
      mkdirSync(join(proc, p.pid, 'ns'), { recursive: true });
      symlinkSync(`mnt:[${p.mnt}]`, join(proc, p.pid, 'ns', 'mnt'));
      if (p.mountinfo !== undefined) writeFileSync(join(proc, p.pid, 'mountinfo'), p.mountinfo);
      const root = join(base, 'roots', p.pid);
      mkdirSync(root, { recursive: true });
      symlinkSync(root, join(proc, p.pid, 'root'));
      for (const [path, target] of Object.entries(p.root ?? {})) {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        symlinkSync(target, join(root, path));
      }
      if (p.net !== undefined) {
        mkdirSync(join(proc, p.pid, 'net'));
        symlinkSync(`net:[${p.net.ino}]`, join(proc, p.pid, 'ns', 'net'));
        if (p.net.fib !== null) writeFileSync(join(proc, p.pid, 'net', 'fib_trie'), p.net.fib);
      }
    }
    return { proc, base };
  }
  const through = (proc: string, pid: string, mountPoint: string) => join(proc, pid, 'root', mountPoint);

  /** readInNetns recording what it enters, answering `addr`'s fib_trie (or doing `then` first). */
  function reader(addr = '10.9.0.1', then?: (path: string) => void) {
    const entered: string[] = [];
    return {
      entered,
      read: async (path: string) => {
        entered.push(path);
        then?.(path);
        return fib(addr);
      },
    };
  }
  /** A plain file and its inode: what a mount table may name, but is no namespace. */
  function plainFile(): { path: string; ino: number } {
    const path = join(dir, `plain-${++n}`);
    writeFileSync(path, '');
    return { path, ino: statSync(path).ino };
  }

  it('a network namespace mounted under any directory, no process in it, is entered through /proc/PID/root; other kinds are not', async () => {
    const { proc } = fakeNode([
      {
        pid: '100',
        mnt: 7001,
        mountinfo: table(
          nsfs(`net:[${NET}]`, '/run/user/1000/netns/pod\\040a', ''),
          nsfs(`uts:[${UTS}]`, '/pinned/uts'),
          nsfs(`ipc:[${IPC}]`, '/pinned/ipc'),
        ),
        root: { '/run/user/1000/netns/pod a': NET_FILE, '/pinned/uts': UTS_FILE, '/pinned/ipc': IPC_FILE },
      },
    ]);
    const r = reader();
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: r.read });
    assert.deepEqual(r.entered, [through(proc, '100', '/run/user/1000/netns/pod a')]);
    assert.deepEqual([...out.addresses], ['10.9.0.1']);
    assert.equal(out.namespaces, 1);
    assert.deepEqual(out.unread, []);
  });

  it('one mount table per mount namespace, however many processes share it', async () => {
    // Both tables list NET; each lists another namespace as well: only one of them is read.
    const { proc } = fakeNode([
      {
        pid: '200',
        mnt: 7002,
        mountinfo: table(nsfs(`net:[${NET}]`, '/a'), nsfs(`net:[${UTS}]`, '/only-200')),
        root: { '/a': NET_FILE, '/only-200': UTS_FILE },
      },
      {
        pid: '201',
        mnt: 7002,
        mountinfo: table(nsfs(`net:[${NET}]`, '/a'), nsfs(`net:[${IPC}]`, '/only-201')),
        root: { '/a': NET_FILE, '/only-201': IPC_FILE },
      },
    ]);
    const r = reader();
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: r.read });
    assert.equal(r.entered.length, 2, r.entered.join(' '));
    assert.equal(out.namespaces, 2);
  });

  it('a namespace is read once: mounted twice, in two mount namespaces, or with a process in it', async () => {
    const { proc } = fakeNode([
      {
        pid: '300',
        mnt: 7003,
        mountinfo: table(nsfs(`net:[${NET}]`, '/x'), nsfs(`net:[${NET}]`, '/y')),
        root: { '/x': NET_FILE, '/y': NET_FILE },
      },
      {
        pid: '301',
        mnt: 7004,
        mountinfo: table(nsfs(`net:[${NET}]`, '/z'), nsfs(`net:[${UTS}]`, '/w')),
        root: { '/z': NET_FILE, '/w': UTS_FILE },
      },
      // In UTS (as far as this fake /proc says): read through its own files, never entered.
      { pid: '302', mnt: 7005, mountinfo: table(), net: { ino: UTS, fib: fib('10.9.0.2') } },
    ]);
    const r = reader();
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: r.read });
    assert.equal(r.entered.length, 1, r.entered.join(' '));
    assert.match(r.entered[0] ?? '', /\/root\/[xyz]$/);
    assert.deepEqual([...out.addresses].sort(), ['10.9.0.1', '10.9.0.2']);
    assert.equal(out.namespaces, 2);
    assert.deepEqual(out.unread, []);
  });

  it('a namespace mounted in two mount namespaces is reached through either, whichever is looked at first', async () => {
    for (const reachable of ['400', '401']) {
      const pins = ['400', '401'].map((pid, i) => ({
        pid,
        mnt: 7006 + i,
        mountinfo: table(nsfs(`net:[${NET}]`, '/p')),
        root: pid === reachable ? { '/p': NET_FILE } : ({} as Record<string, string>),
      }));
      const { proc } = fakeNode(pins);
      const r = reader();
      const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: r.read });
      assert.deepEqual(r.entered, [through(proc, reachable, '/p')]);
      assert.deepEqual(out.unread, []);
    }
  });

  it("a pid whose root does not hold the namespace there (exited and reused, the mount covered) is passed over for the next one's", async () => {
    const mountinfo = table(nsfs(`net:[${NET}]`, '/q'));
    for (const good of ['500', '501']) {
      const { proc } = fakeNode(
        ['500', '501'].map((pid) => ({
          pid,
          mnt: 7010,
          mountinfo,
          root: { '/q': pid === good ? NET_FILE : UTS_FILE },
        })),
      );
      const r = reader();
      const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: r.read });
      assert.deepEqual(r.entered, [through(proc, good, '/q')]);
      assert.deepEqual(out.unread, []);
    }
  });

  it('a mount the table lists that no root reaches (covered, or a plain file of its inode there) is a gap', async () => {
    const plain = plainFile();
    const { proc } = fakeNode([
      {
        pid: '600',
        mnt: 7011,
        mountinfo: table(nsfs(`net:[${plain.ino}]`, '/plain'), nsfs(`net:[${NET}]`, '/covered')),
        root: { '/plain': plain.path },
      },
    ]);
    const r = reader();
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: r.read });
    assert.deepEqual(r.entered, []);
    assert.deepEqual(out.unread.sort(), [`net:[${NET}]`, `net:[${plain.ino}]`].sort());
    assert.equal(out.namespaces, 0);
  });

  it('a mounted namespace that cannot be entered is a gap while it stays mounted', async () => {
    const { proc } = fakeNode([
      { pid: '700', mnt: 7012, mountinfo: table(nsfs(`net:[${NET}]`, '/s')), root: { '/s': NET_FILE } },
    ]);
    const out = await collectNodeAddresses({
      proc,
      netnsDirs: [],
      readInNetns: async () => {
        throw new Error('nsenter: timed out');
      },
    });
    assert.deepEqual(out.unread, [through(proc, '700', '/s')]);
    assert.equal(out.namespaces, 0);
  });

  it('unmounted while it was being entered (a teardown) is no gap: the table lists it no more', async () => {
    const { proc } = fakeNode([
      { pid: '800', mnt: 7013, mountinfo: table(nsfs(`net:[${NET}]`, '/t')), root: { '/t': NET_FILE } },
    ]);
    const out = await collectNodeAddresses({
      proc,
      netnsDirs: [],
      readInNetns: async () => {
        // Another network namespace mounted now, and another kind's file at that inode: neither is it.
        writeFileSync(
          join(proc, '800', 'mountinfo'),
          table(nsfs(`net:[${UTS}]`, '/other'), nsfs(`uts:[${NET}]`, '/t')),
        );
        throw new Error('nsenter: no such file');
      },
    });
    assert.deepEqual(out.unread, []);
    assert.equal(out.namespaces, 0);
  });

  it('the only process of its mount namespace gone meanwhile: its mounts with it, no gap', async () => {
    const { proc } = fakeNode([
      { pid: '900', mnt: 7014, mountinfo: table(nsfs(`net:[${NET}]`, '/u')), root: { '/u': NET_FILE } },
    ]);
    const out = await collectNodeAddresses({
      proc,
      netnsDirs: [],
      readInNetns: async () => {
        rmSync(join(proc, '900'), { recursive: true });
        throw new Error('nsenter: no such file');
      },
    });
    assert.deepEqual(out.unread, []);
  });

  it('a pid reused in another mount namespace meanwhile: neither its new table nor its life speak for the old namespace', async () => {
    const { proc } = fakeNode([
      { pid: '1000', mnt: 7015, mountinfo: table(nsfs(`net:[${NET}]`, '/v')), root: { '/v': NET_FILE } },
    ]);
    const out = await collectNodeAddresses({
      proc,
      netnsDirs: [],
      readInNetns: async () => {
        // The only process of 7015 exited (its mount namespace, and the mount, with it); its pid now
        // names a process of another mount namespace, where the same network namespace is mounted.
        rmSync(join(proc, '1000', 'ns', 'mnt'));
        symlinkSync('mnt:[9999]', join(proc, '1000', 'ns', 'mnt'));
        throw new Error('nsenter: no such file');
      },
    });
    assert.deepEqual(out.unread, []);
  });

  it('a mount table that no longer reads while its process is still in that mount namespace: the namespace it pinned is a gap', async () => {
    const { proc } = fakeNode([
      { pid: '1020', mnt: 7026, mountinfo: table(nsfs(`net:[${NET}]`, '/k')), root: { '/k': NET_FILE } },
    ]);
    const out = await collectNodeAddresses({
      proc,
      netnsDirs: [],
      readInNetns: async () => {
        rmSync(join(proc, '1020', 'mountinfo'));
        throw new Error('nsenter: timed out');
      },
    });
    assert.deepEqual(out.unread, [through(proc, '1020', '/k')]);
  });

  it('a process gone but not reaped (a zombie is in no namespace): its mount table unread is no gap', async () => {
    const { proc } = fakeNode([{ pid: '1050', mnt: 7025 }]);
    // A zombie's /proc/PID stays, its ns links do not read: listed first, it exits before its table is read.
    const dirs = join(dir, `dirs-${++n}`);
    mkdirSync(dirs);
    symlinkSync('/proc/self/ns/net', join(dirs, 'pod'));
    const r = reader('10.9.0.5', () => rmSync(join(proc, '1050', 'ns', 'mnt')));
    const out = await collectNodeAddresses({ proc, netnsDirs: [dirs], readInNetns: r.read });
    assert.deepEqual(out.unread, []);
  });

  it('entered, but the mount replaced meanwhile: what was read is not taken, and the namespace still mounted is a gap', async () => {
    const { proc, base } = fakeNode([
      { pid: '1100', mnt: 7016, mountinfo: table(nsfs(`net:[${NET}]`, '/w')), root: { '/w': NET_FILE } },
    ]);
    const r = reader('10.9.9.9', () => {
      rmSync(join(base, 'roots', '1100', 'w'));
      symlinkSync(UTS_FILE, join(base, 'roots', '1100', 'w'));
    });
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: r.read });
    assert.equal(r.entered.length, 1);
    assert.deepEqual([...out.addresses], []);
    assert.equal(out.namespaces, 0);
    assert.deepEqual(out.unread, [through(proc, '1100', '/w')]);
  });

  it('a mount table that cannot be read (none, or over 16 MiB) while its processes live is a gap', async () => {
    const { proc } = fakeNode([
      { pid: '1200', mnt: 7017 },
      { pid: '1201', mnt: 7018, mountinfo: `${table(nsfs(`net:[${NET}]`, '/m'))}\n${' '.repeat(16 * 1024 * 1024)}` },
    ]);
    const r = reader();
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: r.read });
    assert.deepEqual(r.entered, []);
    assert.deepEqual(out.unread.sort(), ['mnt:[7017]', 'mnt:[7018]']);
  });

  it('a mount table whose processes all left before it was read is no gap', async () => {
    const dirs = join(dir, `dirs-${++n}`);
    mkdirSync(dirs);
    symlinkSync('/proc/self/ns/net', join(dirs, 'pod'));
    const { proc } = fakeNode([{ pid: '1250', mnt: 7019, mountinfo: table(nsfs(`net:[${UTS}]`, '/g')) }]);
    // The netns dir is read before the mount tables: the process exits meanwhile.
    const r = reader('10.9.0.3', () => rmSync(join(proc, '1250'), { recursive: true }));
    const out = await collectNodeAddresses({ proc, netnsDirs: [dirs], readInNetns: r.read });
    assert.deepEqual(r.entered, [join(dirs, 'pod')]);
    assert.deepEqual(out.unread, []);
  });

  it('a mount point that is not UTF-8 cannot be named to nsenter: a gap, unless the namespace is mounted elsewhere too', async () => {
    const bad = Buffer.from(`${table(nsfs(`net:[${NET}]`, '/bad\xff'))}\n`, 'latin1');
    const alone = fakeNode([{ pid: '1300', mnt: 7020, mountinfo: bad }]);
    const r = reader();
    const out = await collectNodeAddresses({ proc: alone.proc, netnsDirs: [], readInNetns: r.read });
    assert.deepEqual(r.entered, []);
    assert.deepEqual(out.unread, [`net:[${NET}]`]);
    const both = fakeNode([
      {
        pid: '1301',
        mnt: 7021,
        mountinfo: Buffer.concat([bad, Buffer.from(nsfs(`net:[${NET}]`, '/caf\xc3\xa9'), 'latin1')]),
        root: { '/café': NET_FILE },
      },
    ]);
    const r2 = reader();
    const out2 = await collectNodeAddresses({ proc: both.proc, netnsDirs: [], readInNetns: r2.read });
    assert.deepEqual(r2.entered, [through(both.proc, '1301', '/café')]);
    assert.deepEqual(out2.unread, []);
  });

  it('an nsfs mount of no kind the proof can tell may be a network namespace: a gap', async () => {
    const { proc } = fakeNode([{ pid: '1400', mnt: 7022, mountinfo: table(nsfs('/', '/odd')) }]);
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: reader().read });
    assert.deepEqual(out.unread, ['an nsfs mount of no known kind in mnt:[7022]']);
  });

  it('a namespace a netns dir gave, read or not, is not entered again through its mount', async () => {
    for (const fails of [false, true]) {
      const dirs = join(dir, `dirs-${++n}`);
      mkdirSync(dirs);
      symlinkSync('/proc/self/ns/net', join(dirs, 'pod'));
      const { proc } = fakeNode([
        { pid: '1500', mnt: 7023, mountinfo: table(nsfs(`net:[${NET}]`, '/pod')), root: { '/pod': NET_FILE } },
      ]);
      const entered: string[] = [];
      const out = await collectNodeAddresses({
        proc,
        netnsDirs: [dirs],
        readInNetns: async (p) => {
          entered.push(p);
          if (fails) throw new Error('nsenter: timed out');
          return fib('10.9.0.4');
        },
      });
      assert.deepEqual(entered, [join(dirs, 'pod')], `fails=${fails}`);
      assert.deepEqual(out.unread, fails ? [join(dirs, 'pod')] : []);
    }
  });

  it('a namespace whose process cannot be read is not entered again through its mount', async () => {
    const { proc } = fakeNode([
      {
        pid: '1600',
        mnt: 7024,
        mountinfo: table(nsfs(`net:[${NET}]`, '/n')),
        root: { '/n': NET_FILE },
        net: { ino: NET, fib: null },
      },
    ]);
    const r = reader();
    const out = await collectNodeAddresses({ proc, netnsDirs: [], readInNetns: r.read });
    assert.deepEqual(r.entered, []);
    assert.deepEqual(out.unread, [`net:[${NET}]`]);
  });
});

describe('addresses in their comparable form', () => {
  it('IPv4 without leading zeros, IPv6 with every group in full, an IPv4 tail as two groups', () => {
    assert.equal(canonicalIp(' 10.1.2.3 '), '10.1.2.3');
    assert.equal(canonicalIp('::'), '0000:0000:0000:0000:0000:0000:0000:0000');
    assert.equal(canonicalIp('fd00::'), 'fd00:0000:0000:0000:0000:0000:0000:0000');
    assert.equal(canonicalIp('1:2:3:4:5:6:7:8'), '0001:0002:0003:0004:0005:0006:0007:0008');
    assert.equal(canonicalIp('::ffff:1.2.3.4'), '0000:0000:0000:0000:0000:ffff:0102:0304');
    assert.equal(canonicalIp('64:ff9b::255.255.255.255'), '0064:ff9b:0000:0000:0000:0000:ffff:ffff');
    assert.equal(canonicalIp('10.1.2'), null);
    assert.equal(canonicalIp(''), null);
  });

  it('fib_trie: a leaf is the address only when its line says /32 host LOCAL', () => {
    const text = [
      'Local:',
      '  |-- 10.0.0.1',
      '     /32 host LOCAL',
      '  |-- 10.0.0.2',
      '     /32 link BROADCAST',
      '  |-- 10.0.0.3 ',
      '     /32 host LOCAL   ',
      '  |-- 10.0.0.4',
      '     /32 host LOCALX',
      '  |-- 10.0.0.5',
      '     x /32 host LOCAL',
      '  |-- 10.0.12.34',
      '     /32 host LOCAL',
      '  +-- 10.0.0.0/8 2 0 2',
      '     /32 host LOCAL',
    ].join('\n');
    assert.deepEqual(parseFibTrieLocal(text), ['10.0.0.1', '10.0.0.3', '10.0.12.34']);
    assert.deepEqual(parseFibTrieLocal('     /32 host LOCAL\n'), [], 'no leaf before it');
  });

  it('if_inet6: only lines starting with 32 hex digits, any case', () => {
    const text = [
      'FD00000000000000000000000000000B 02 40 00 80 eth0',
      'fd00000000000000000000000000000 02 40 00 80 short',
      ' fd00000000000000000000000000000c 02 40 00 80 indented',
      'fd00000000000000000000000000000dx 02 40 00 80 long',
      '',
    ].join('\n');
    assert.deepEqual(parseIfInet6(text), ['fd00:0000:0000:0000:0000:0000:0000:000b']);
  });

  it("a result's addresses: ips entries without an address, and non-string ones, are skipped", () => {
    assert.deepEqual(
      resultAddresses({ ips: [null, {}, { address: 5 }, { address: 'bogus' }, { address: '10.0.0.1/8' }] }),
      ['10.0.0.1'],
    );
    assert.deepEqual(resultAddresses({ ips: 'x', ip6: { ip: 'fd00::1/64' } }), [
      'fd00:0000:0000:0000:0000:0000:0000:0001',
    ]);
    assert.deepEqual(resultAddresses('10.0.0.1'), []);
    assert.deepEqual(storedResultAddresses(null), []);
    assert.deepEqual(storedResultAddresses('not json'), []);
    assert.deepEqual(storedResultAddresses('{"ips":[{"address":"10.0.0.2/24"}]}'), ['10.0.0.2']);
  });
});

describe("the runtime's answer against what the node proves", () => {
  it('an id not in the runtime form, or a pod with its netns missing from the list, distrusts the answer', () => {
    assert.equal(runtimeDistrust([id('a')], [id('a')]), undefined);
    assert.match(runtimeDistrust([id('A')], []) ?? '', /not 64 lower-case hex/);
    assert.match(runtimeDistrust([id('a').slice(0, 12)], []) ?? '', /not 64 lower-case hex/);
    assert.match(runtimeDistrust([`sha256:${id('a')}`], []) ?? '', /not 64 lower-case hex/);
    assert.match(runtimeDistrust([], [id('b')]) ?? '', /listed no sandbox while 1 journalled pod/);
    assert.match(
      runtimeDistrust([id('a')], [id('b'), id('b')]) ?? '',
      /^1 journalled pod\(s\) whose network namespace exists are missing/,
    );
  });
});

describe('sightings: passes the grace apart agree before what the node cannot prove is released', () => {
  function leaseDir(name: string, cid: string): string {
    const root = join(dir, name);
    mkdirSync(join(root, 'net'), { recursive: true });
    const p = join(root, 'net', '10.1.0.5');
    writeFileSync(p, `${cid}\r\neth0`);
    const t = (Date.now() - 5 * HOUR) / 1000;
    utimesSync(p, t, t);
    return root;
  }

  function deps(o: {
    leaseDir: string;
    node: NodeAddresses;
    sightings: AuditDeps['sightings'];
    now: () => number;
    run: string[];
  }): AuditDeps {
    return {
      journal: { attachmentsInState: () => [], stepsOf: () => [] },
      teardown: async () => ({ done: true }),
      run: async (req) => {
        o.run.push(`${req.command} ${req.type} ${req.containerId.slice(0, 1)}`);
        return {} as never;
      },
      listSandboxes: async () => [],
      runtime: () => ({ reachable: true, endpoint: 'unix:///fake.sock', sandboxes: 0 }),
      leaseDirs: [o.leaseDir],
      cacheDir: join(dir, 'no-results'),
      nodeAddresses: async () => o.node,
      sightings: o.sightings,
      log: pino({ level: 'silent' }),
      now: o.now,
    };
  }

  it('with part of the node unread, one pass is never enough; a pass the grace later, after a restart, releases', async () => {
    const db = join(dir, 'sightings.db');
    let clock = Date.now();
    const calls: string[] = [];
    const unread: NodeAddresses = { addresses: new Set(), namespaces: 3, unread: ['/run/netns/stuck'] };
    const lease = leaseDir('unread', id('d'));
    const first = new Store(db);
    const r1 = await runAudit(
      deps({ leaseDir: lease, node: unread, sightings: first.sightings, now: () => clock, run: calls }),
      { release: true, graceMs: HOUR },
    );
    assert.deepEqual(
      r1.orphans.map((o) => o.released),
      [false],
    );
    assert.deepEqual(calls, [], 'no DEL on the runtime word alone');
    first.close();

    clock += HOUR - 1000;
    const second = new Store(db); // a restart: the sighting is read back from the journal
    const r2 = await runAudit(
      deps({ leaseDir: lease, node: unread, sightings: second.sightings, now: () => clock, run: calls }),
      { release: true, graceMs: HOUR },
    );
    assert.deepEqual(
      r2.orphans.map((o) => o.released),
      [false],
      'still inside the grace since the first sighting',
    );
    clock += 2000;
    const r3 = await runAudit(
      deps({ leaseDir: lease, node: unread, sightings: second.sightings, now: () => clock, run: calls }),
      { release: true, graceMs: HOUR },
    );
    assert.deepEqual(
      r3.orphans.map((o) => o.released),
      [true],
    );
    assert.deepEqual(calls, ['DEL host-local d']);
    second.close();
  });

  it('the whole node read and the address nowhere: released at once past the grace; on an interface: never', async () => {
    const calls: string[] = [];
    const clean: NodeAddresses = { addresses: new Set(), namespaces: 3, unread: [] };
    const r = await runAudit(
      deps({ leaseDir: leaseDir('proven', id('e')), node: clean, sightings: undefined, now: Date.now, run: calls }),
      { release: true, graceMs: HOUR },
    );
    assert.deepEqual(
      r.orphans.map((o) => o.released),
      [true],
    );
    const inUse: NodeAddresses = { addresses: new Set(['10.1.0.5']), namespaces: 3, unread: ['/run/netns/x'] };
    const old = new Map([[`lease\0${join(dir, 'inuse', 'net', '10.1.0.5')}\0${id('f')}`, Date.now() - 10 * HOUR]]);
    const kept = await runAudit(
      deps({
        leaseDir: leaseDir('inuse', id('f')),
        node: inUse,
        sightings: { load: () => new Map(old), save: () => undefined },
        now: Date.now,
        run: calls,
      }),
      { release: true, graceMs: HOUR },
    );
    assert.deepEqual(kept.orphans, [], 'a lease whose address is on an interface is not an orphan');
    assert.deepEqual(calls, ['DEL host-local e']);
  });
});
