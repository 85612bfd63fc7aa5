// What the DEL spool (engine/spool.ts) tells an operator: why each entry that cannot be read safely
// was moved to spool/rejected/ (a link, a directory, a FIFO, a socket, an oversized file, a command
// other than DEL), when it could not even be moved aside, when a spooled DEL did not complete, what
// the start-up drain found and did, and which spooled DELs keep their file (their teardown could not
// be journaled). Root-free: temp dirs, a capturing logger.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { CniError } from '@cni-steward/shared';
import { MAX_SPOOL_FILE_BYTES, SpoolDrain, ingestNames, ingestSpool } from '../../daemon/src/engine/spool.js';
import { JournalWriteError } from '../../daemon/src/store/write-error.js';
import { NETNS, conf, deferred, req, setup } from '../helpers/engine-fakes.js';
import { fullDisk } from '../helpers/full-journal.js';
import { captureLog } from '../helpers/log-capture.js';

const root = mkdtempSync(join(tmpdir(), 'steward-spool-log-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => {
  const d = join(root, `spool-${++n}`);
  mkdirSync(d);
  return d;
};

const chain = conf([{ type: 'one' }, { type: 'two' }]);

function wire(command: string, containerId: string, args = '') {
  return JSON.stringify({
    env: {
      CNI_COMMAND: command,
      CNI_CONTAINERID: containerId,
      CNI_NETNS: NETNS,
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/fake',
      ...(args ? { CNI_ARGS: args } : {}),
    },
    config: chain,
  });
}

const spoolName = (t: number, id: string, i: number) =>
  `${String(t).padStart(15, '0')}-${id}-${i.toString(16).padStart(8, '0')}.json`;

describe('spool: why an entry was rejected', () => {
  test('each kind of unreadable entry is moved aside with its reason in the log', async () => {
    const { engine, plugins } = setup();
    const dir = freshDir();
    writeFileSync(join(root, 'target.json'), wire('DEL', 'y'));
    symlinkSync(join(root, 'target.json'), join(dir, 'link.json'));
    mkdirSync(join(dir, 'dir.json'));
    execFileSync('mkfifo', [join(dir, 'fifo.json')]);
    const server = createServer();
    await new Promise<void>((r) => server.listen(join(dir, 'sock.json'), r));
    writeFileSync(join(dir, 'big.json'), Buffer.alloc(MAX_SPOOL_FILE_BYTES + 1, 0x20));
    writeFileSync(join(dir, 'add.json'), wire('ADD', 'x'));
    const cap = captureLog();
    try {
      assert.deepEqual(await ingestSpool(engine, dir, cap.log), { ingested: 0, rejected: 6 });
    } finally {
      await new Promise((r) => server.close(r));
    }
    assert.equal(plugins.calls.length, 0, 'nothing rejected is run');
    const why = Object.fromEntries(
      cap
        .of('spooled DEL rejected; moved to spool/rejected')
        .map((r) => [String(r.file).slice(dir.length + 1), [String(r.movedTo).slice(dir.length + 1), r.err]]),
    );
    assert.deepEqual(why, {
      'link.json': ['rejected/link.json', 'is a symbolic link; only regular files are read'],
      'dir.json': ['rejected/dir.json', 'is a directory; only regular files are read'],
      'fifo.json': ['rejected/fifo.json', 'is a FIFO; only regular files are read'],
      // Linux refuses to open a socket at all (ENXIO): said as what it is.
      'sock.json': [
        'rejected/sock.json',
        'is a socket (or a device with nothing behind it); only regular files are read',
      ],
      'big.json': [
        'rejected/big.json',
        `is ${MAX_SPOOL_FILE_BYTES + 1} bytes, more than the ${MAX_SPOOL_FILE_BYTES} a spooled DEL can be`,
      ],
      'add.json': ['rejected/add.json', 'spooled command is ADD, only DEL is spooled'],
    });
    assert.equal(cap.rows.length, 6, 'one row per entry, nothing else');
    assert.ok(
      cap.rows.every((r) => r.level === 50),
      'logged as errors',
    );
  });

  test('when rejected/ is a link, nothing is moved through it, and the log says so', async () => {
    const { engine } = setup();
    const dir = freshDir();
    const elsewhere = freshDir();
    symlinkSync(elsewhere, join(dir, 'rejected'));
    writeFileSync(join(dir, 'bad.json'), 'nope');
    const cap = captureLog();
    assert.deepEqual(await ingestSpool(engine, dir, cap.log), { ingested: 0, rejected: 0 });
    assert.ok(existsSync(join(dir, 'bad.json')), 'the entry stays where it was');
    assert.deepEqual(readdirSync(elsewhere), [], 'nothing was moved where the link points');
    const rows = cap.of('spooled DEL rejected and could not be moved aside');
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.file, join(dir, 'bad.json'));
    assert.match(String(rows[0]!.err), /JSON/);
    assert.equal(
      rows[0]!.moveErr,
      `${join(dir, 'rejected')} is not a directory (a symbolic link?); not moving anything into it`,
    );
  });
});

describe('spool: a spooled DEL that fails', () => {
  test('with its teardown journaled: logged with its file, container and pod, and its file removed', async () => {
    const dir = freshDir();
    writeFileSync(join(dir, 'f.json'), wire('DEL', 'ctr-1', 'K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web;K8S_POD_UID=u-9'));
    const engine = {
      spoolHold: undefined,
      spooledDel: async () => {
        throw new Error('plugin two timed out');
      },
      spooledDelJournaled: () => true,
    } as unknown as Parameters<typeof ingestSpool>[0];
    const cap = captureLog();
    assert.deepEqual(await ingestSpool(engine, dir, cap.log), { ingested: 1, rejected: 0 });
    assert.deepEqual(cap.of('spooled DEL did not complete; its teardown stays queued'), [
      {
        file: join(dir, 'f.json'),
        containerId: 'ctr-1',
        podNamespace: 'ns1',
        podName: 'web',
        podUid: 'u-9',
        err: 'plugin two timed out',
      },
    ]);
    assert.deepEqual(readdirSync(dir), []);
  });
});

describe('spool: the start-up drain tells what it found and did', () => {
  test('scan names the backlog; start reports it drained', async () => {
    const { engine } = setup();
    const dir = freshDir();
    const t = Date.now() - 1000;
    writeFileSync(join(dir, spoolName(t, 'a', 1)), wire('DEL', 'a'));
    writeFileSync(join(dir, spoolName(t, 'a', 2)), wire('DEL', 'a'));
    writeFileSync(join(dir, spoolName(t, 'b', 1)), wire('DEL', 'b'));
    writeFileSync(join(dir, 'odd.json'), '{not json');
    const cap = captureLog();
    const drain = new SpoolDrain(engine, dir, cap.log);
    assert.equal(drain.scan(), 4);
    assert.deepEqual(cap.of('draining 4 spooled DELs in the background'), [{ spooled: 4, containers: 2 }]);
    const report = await drain.start();
    assert.deepEqual(report, { ingested: 3, rejected: 1 });
    const drained = cap.of('spooled DELs drained');
    assert.equal(drained.length, 1);
    assert.deepEqual({ ...drained[0], ms: 0 }, { ingested: 3, rejected: 1, ms: 0 });
    const ms = drained[0]!.ms as number;
    assert.ok(ms >= 0 && ms < 60_000, `the drain took ${ms} ms by its own account`);
    assert.equal(drain.pending, 0);
  });

  test('an empty or missing spool is not announced and drains nothing', async () => {
    const { engine } = setup();
    const cap = captureLog();
    for (const dir of [freshDir(), join(root, 'missing')]) {
      const drain = new SpoolDrain(engine, dir, cap.log);
      assert.equal(drain.scan(), 0);
      assert.deepEqual(await drain.start(), { ingested: 0, rejected: 0 });
    }
    assert.deepEqual(cap.rows, []);
    assert.equal(engine.spoolHold, undefined, 'no container is held');
  });
});

describe('spool: the start-up drain releases each container as soon as its own spooled DELs are done', () => {
  test('a container is released while another’s spooled DEL still runs; the backlog counts down', async () => {
    const dir = freshDir();
    const t = Date.now() - 1000;
    const long = 'l'.repeat(70);
    writeFileSync(join(dir, spoolName(t, 'a', 1)), wire('DEL', 'a'));
    writeFileSync(join(dir, spoolName(t, 'b', 1)), wire('DEL', 'b'));
    writeFileSync(join(dir, spoolName(t, long.slice(0, 64), 1)), wire('DEL', long));
    writeFileSync(join(dir, 'odd.json'), wire('DEL', 'odd'));
    writeFileSync(join(dir, 'notes.txt'), 'not a spool entry');
    const bDone = deferred();
    const fake = {
      spoolHold: undefined as ((id: string) => Promise<void> | undefined) | undefined,
      spooledDel: (r: { env: { containerId: string } }) =>
        r.env.containerId === 'b' ? bDone.promise.then(() => '') : Promise.resolve(''),
    };
    const engine = fake as unknown as Parameters<typeof ingestSpool>[0];
    const cap = captureLog();
    const drain = new SpoolDrain(engine, dir, cap.log);
    assert.equal(drain.scan(), 4, 'three named entries and one other .json; notes.txt is no entry');
    const holdA = fake.spoolHold?.('a');
    const holdB = fake.spoolHold?.('b');
    const holdLong = fake.spoolHold?.(long);
    assert.ok(holdA && holdB && holdLong, 'each named container is held (a long id by its first 64 characters)');
    // Written after the scan: one named for b but stamped later than the scan, one for a container
    // the scan never saw. Neither is counted, and neither releases anything.
    writeFileSync(join(dir, spoolName(Date.now() + 60_000, 'b', 2)), wire('DEL', 'later'));
    writeFileSync(join(dir, spoolName(t, 'unseen', 1)), wire('DEL', 'unseen'));
    writeFileSync(join(dir, 'late.json'), wire('DEL', 'late-odd'));
    const released = new Set<string>();
    void holdA.then(() => released.add('a'));
    void holdB.then(() => released.add('b'));
    void holdLong.then(() => released.add('long'));
    const started = drain.start();
    const deadline = Date.now() + 5000;
    while (drain.pending > 1) {
      assert.ok(Date.now() < deadline, `the backlog counted down to b's one entry (pending ${drain.pending})`);
      await new Promise((r) => setTimeout(r, 5));
    }
    await new Promise((r) => setImmediate(r));
    assert.deepEqual([...released].sort(), ['a', 'long'], 'released once their own DELs were done; b still held');
    assert.equal(drain.pending, 1);
    bDone.resolve();
    assert.deepEqual(await started, { ingested: 7, rejected: 0 });
    assert.deepEqual([...released].sort(), ['a', 'b', 'long']);
    assert.equal(drain.pending, 0);
    assert.deepEqual(readdirSync(dir), ['notes.txt']);
  });
});

describe('spool: passes over one dir never overlap, and leave no descriptor open', () => {
  test('a scheduler pass while another runs over the dir skips it at once; no DEL runs twice', async () => {
    const dir = freshDir();
    writeFileSync(join(dir, spoolName(Date.now() - 1000, 'o', 1)), wire('DEL', 'o'));
    const gate = deferred();
    const runs: string[] = [];
    const engine = {
      spoolHold: undefined,
      spooledDel: async (r: { env: { containerId: string } }) => {
        runs.push(r.env.containerId);
        await gate.promise;
        return '';
      },
    } as unknown as Parameters<typeof ingestSpool>[0];
    const first = ingestSpool(engine, dir, captureLog().log);
    let second: unknown;
    void ingestSpool(engine, dir, captureLog().log).then((r) => (second = r));
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(second, { ingested: 0, rejected: 0 }, 'skipped while the first pass still runs');
    assert.deepEqual(runs, ['o']);
    gate.resolve();
    assert.deepEqual(await first, { ingested: 1, rejected: 0 });
    assert.deepEqual(runs, ['o'], 'the spooled DEL ran once');
  });

  test('scanning and draining close every file and directory they opened', async () => {
    const { engine } = setup();
    const dir = freshDir();
    const t = Date.now() - 1000;
    for (let i = 0; i < 20; i++) writeFileSync(join(dir, spoolName(t, `c${i}`, i)), wire('DEL', `c${i}`));
    // Only this test's spool: other tests' leftovers (a socket closing, the thread pool's files) come
    // and go in /proc/self/fd on their own schedule.
    const fds = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`).startsWith(dir);
        } catch {
          return false; // closed since it was listed
        }
      }).length;
    const before = fds();
    assert.equal(before, 0);
    const drain = new SpoolDrain(engine, dir, captureLog().log);
    assert.equal(drain.scan(), 20);
    assert.equal(fds(), before, 'the scan closed the spool dir');
    assert.deepEqual(await drain.start(), { ingested: 20, rejected: 0 });
    assert.equal(fds(), before, 'the drain closed every entry and the dir');
  });
});

// A spooled DEL whose teardown could not reach the journal keeps its file (engine/spool.ts runBatch):
// the runtime was told that DEL was done when the shim spooled it, so the file is the only record of
// it. Its file went with it before, and on a full disk the attachment stayed `added`, its lease held,
// for good. A real engine on an in-memory journal whose statements fail as a full disk's do
// (SQLITE_FULL, turned into code 11 by the store).

const KEY = { network: 'net', ifname: 'eth0' };

/** A spooled DEL of `containerId` with this netconf. */
function delWire(containerId: string, config: Record<string, unknown> = chain, args = '') {
  const body = JSON.parse(wire('DEL', containerId, args)) as { config: unknown };
  return JSON.stringify({ ...body, config });
}

const KEPT = /^1 spooled DEL\(s\) failed before their teardown was journaled; their files stay for the next pass$/;

describe('spool: a spooled DEL whose teardown cannot be journaled', () => {
  test('keeps its file, logged once with its fields; the next pass with room runs it and removes the file', async () => {
    const { engine, store, plugins } = setup();
    await engine.handle(req('ADD', 'ctr-9', chain));
    let full = true;
    const disk = fullDisk(store, 'setAttachmentState', () => full);
    const dir = freshDir();
    writeFileSync(
      join(dir, 'f.json'),
      delWire('ctr-9', chain, 'K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web;K8S_POD_UID=u-9'),
    );
    const cap = captureLog();
    assert.deepEqual(await ingestSpool(engine, dir, cap.log), { ingested: 0, rejected: 0, kept: 1 });
    assert.ok(disk.failures > 0);
    assert.deepEqual(readdirSync(dir), ['f.json'], 'the file stays');
    const kept = cap.rows.filter((r) => KEPT.test(r.msg));
    assert.equal(kept.length, 1, JSON.stringify(cap.rows));
    assert.equal(kept[0]!.kept, 1);
    assert.equal(kept[0]!.file, join(dir, 'f.json'));
    assert.equal(kept[0]!.containerId, 'ctr-9');
    assert.equal(kept[0]!.podName, 'web');
    assert.match(String(kept[0]!.err), /could not write its journal/);
    assert.deepEqual(cap.of('spooled DEL did not complete; its teardown stays queued'), []);
    assert.deepEqual(
      cap.rows.filter((r) => /could not be removed/.test(r.msg)),
      [],
      'none done but left',
    );
    assert.deepEqual(plugins.of('DEL'), [], 'no delegate DEL ran before the journal had it');
    assert.equal(store.currentAttachment({ containerId: 'ctr-9', ...KEY })?.state, 'added');

    full = false;
    assert.deepEqual(await ingestSpool(engine, dir, cap.log), { ingested: 1, rejected: 0 });
    assert.deepEqual(readdirSync(dir), []);
    assert.deepEqual(plugins.of('DEL'), ['DEL two ctr-9', 'DEL one ctr-9']);
    assert.equal(store.currentAttachment({ containerId: 'ctr-9', ...KEY })?.state, 'deleted');
  });

  test('a full journal ends the pass after its batch; another failure does not', async () => {
    // 300 DELs: a pass's batches are 256 entries (spool-batches.test.ts).
    const { engine, store } = setup();
    for (let i = 0; i < 300; i++)
      store.createAttachment(
        {
          containerId: `c${i}`,
          ...KEY,
          netns: NETNS,
          cniArgs: '',
          cniPath: '/fake',
          cniVersion: '1.0.0',
          bootId: 'boot',
          config: JSON.stringify(chain),
          result: null,
        } as never,
        'added',
      );
    fullDisk(store, 'setAttachmentState', () => true);
    const dir = freshDir();
    for (let i = 0; i < 300; i++) writeFileSync(join(dir, spoolName(1, `c${i}`, i)), delWire(`c${i}`));
    const report = await ingestSpool(engine, dir, captureLog().log);
    assert.deepEqual(report, { ingested: 0, rejected: 0, kept: 256 }, 'one batch, then the pass ended');
    assert.equal(readdirSync(dir).length, 300);

    // Failures that are not the journal's inability to write or read: every batch is still tried,
    // so one file that always fails holds none behind it. A plugin's or a bug's error, and the
    // journal's constraint error (104: one row's bug, not the disk).
    for (const failure of [new CniError(104, 'a bug'), new JournalWriteError(104, 'a constraint'), new Error('x')]) {
      const calls: string[] = [];
      const broken = {
        spoolHold: undefined,
        spooledDel: async (r: { env: { containerId: string } }) => {
          calls.push(r.env.containerId);
          throw failure;
        },
        spooledDelJournaled: () => false,
      } as unknown as Parameters<typeof ingestSpool>[0];
      assert.deepEqual(await ingestSpool(broken, dir, captureLog().log), { ingested: 0, rejected: 0, kept: 300 });
      assert.equal(calls.length, 300, failure.message);
    }
    // A journal that cannot say whether a DEL is journaled cannot be read: the pass ends too.
    const unreadable = {
      spoolHold: undefined,
      spooledDel: async () => {
        throw new Error('disk I/O error');
      },
      spooledDelJournaled: () => {
        throw new Error('disk I/O error');
      },
    } as unknown as Parameters<typeof ingestSpool>[0];
    assert.deepEqual(await ingestSpool(unreadable, dir, captureLog().log), { ingested: 0, rejected: 0, kept: 256 });
    assert.equal(readdirSync(dir).length, 300);
  });

  test("a batch ends the pass when any of its DELs met the journal's failure, whatever the others did", async () => {
    // One attachment whose teardown cannot be journaled, first; 299 DELs of containers steward never
    // saw (their tombstones are other rows, written fine). A request's pass (ingestNames) keeps the order.
    const { engine, store } = setup();
    await engine.handle(req('ADD', 'c0', chain));
    fullDisk(store, 'setAttachmentState', () => true);
    const dir = freshDir();
    const names = Array.from({ length: 300 }, (_, i) => spoolName(1, `c${i}`, i));
    for (const [i, name] of names.entries()) writeFileSync(join(dir, name), delWire(`c${i}`));
    assert.deepEqual(await ingestNames(engine, dir, names, captureLog().log), { ingested: 255, rejected: 0, kept: 1 });
    assert.equal(readdirSync(dir).length, 1 + 44, 'the kept file, and the batch after it left for the next pass');
  });

  test('a DEL whose netconf names no network is answered with success (nothing can be held for it): its file goes, nothing runs for it, the rest run', async () => {
    const { engine, plugins } = setup();
    const dir = freshDir();
    const { name: _, ...nameless } = chain;
    writeFileSync(join(dir, spoolName(1, 'nameless', 1)), delWire('nameless', nameless));
    writeFileSync(join(dir, spoolName(2, 'named', 2)), delWire('named'));
    const cap = captureLog();
    assert.deepEqual(await ingestSpool(engine, dir, cap.log), { ingested: 2, rejected: 0 });
    assert.deepEqual(readdirSync(dir), []);
    assert.deepEqual(plugins.of('DEL'), ['DEL two named', 'DEL one named']);
    assert.deepEqual(cap.of('spooled DEL did not complete; its teardown stays queued'), []);
    assert.equal(engine.configWarnings().filter((w) => /no network "name"/.test(w)).length, 1);
  });

  test('a file whose DEL is done but that cannot be removed is told once a pass, and holds no file behind it', async () => {
    const { engine, plugins } = setup();
    const dir = freshDir();
    const names = Array.from({ length: 300 }, (_, i) => spoolName(1, `s${i}`, i));
    for (const [i, name] of names.entries()) writeFileSync(join(dir, name), delWire(`s${i}`));
    // While its DEL runs, each of the first three files becomes a directory: removing it fails
    // (EISDIR). The fourth is removed by someone else meanwhile (ENOENT): gone, as it should be.
    const stuck = names.slice(0, 3);
    const vanishing = names[3]!;
    plugins.on('one', (c) => {
      const i = names.findIndex((nm) => nm.includes(`-${c.containerId}-`));
      if (c.command !== 'DEL') return;
      if (stuck.includes(names[i]!)) {
        rmSync(join(dir, names[i]!));
        mkdirSync(join(dir, names[i]!));
      }
      if (names[i] === vanishing) rmSync(join(dir, vanishing), { force: true });
    });
    const cap = captureLog();
    assert.deepEqual(await ingestSpool(engine, dir, cap.log), { ingested: 300, rejected: 0 });
    assert.equal(plugins.of('DEL').length, 600, 'every DEL ran: the pass went on past the stuck files');
    assert.deepEqual(readdirSync(dir).sort(), [...stuck].sort());
    assert.deepEqual(
      cap.rows.filter((r) => /failed before their teardown was journaled/.test(r.msg)),
      [],
      'nothing kept',
    );
    const told = cap.rows.filter((r) => /spooled DEL\(s\) done, but their files could not be removed/.test(r.msg));
    assert.equal(told.length, 1, JSON.stringify(told));
    assert.equal(told[0]!.stuck, 3);
    assert.equal(
      told[0]!.msg,
      '3 spooled DEL(s) done, but their files could not be removed; the next pass finds them done',
    );
    assert.match(String(told[0]!.err), /EISDIR|EPERM/);
  });

  test('journaled or not, as the journal says: the attachment deleting or deleted, or no network to DEL', async () => {
    const { engine, store } = setup();
    const asked = (cid: string, config: Record<string, unknown> = chain) =>
      engine.spooledDelJournaled(req('DEL', cid, config));
    assert.equal(asked('never-seen'), false, 'no attachment: only the file knows this DEL');
    await engine.handle(req('ADD', 'c-added', chain));
    assert.equal(asked('c-added'), false);
    const { name: _, ...nameless } = chain;
    assert.equal(asked('c-added', nameless), true, 'no network name: no pass could ever run it');
    const a = store.currentAttachment({ containerId: 'c-added', ...KEY })!;
    store.setAttachmentState(a.id, 'deleting');
    assert.equal(asked('c-added'), true);
    store.setAttachmentState(a.id, 'deleted');
    assert.equal(asked('c-added'), true);
    store.setAttachmentState(a.id, 'adding');
    assert.equal(asked('c-added'), false);
  });

  test('a store that cannot say whether it is journaled keeps the file too', async () => {
    const dir = freshDir();
    writeFileSync(join(dir, 'f.json'), delWire('ctr-7'));
    const engine = {
      spoolHold: undefined,
      spooledDel: async () => {
        throw new Error('disk I/O error');
      },
      spooledDelJournaled: () => {
        throw new Error('disk I/O error');
      },
    } as unknown as Parameters<typeof ingestSpool>[0];
    assert.deepEqual(await ingestSpool(engine, dir, captureLog().log), { ingested: 0, rejected: 0, kept: 1 });
    assert.deepEqual(readdirSync(dir), ['f.json']);
  });

  test('a DEL steward never added runs its plugins once: a tombstone that cannot be written still lets its file go', async () => {
    const { engine, store, plugins } = setup();
    let full = true;
    fullDisk(store, 'insertAttachment', () => full);
    const dir = freshDir();
    writeFileSync(join(dir, 'f.json'), delWire('stranger'));
    const cap = captureLog();
    assert.deepEqual(await ingestSpool(engine, dir, cap.log), { ingested: 1, rejected: 0 });
    assert.deepEqual(readdirSync(dir), []);
    assert.deepEqual(plugins.of('DEL'), ['DEL two stranger', 'DEL one stranger']);
    assert.equal(store.currentAttachment({ containerId: 'stranger', ...KEY }), undefined);
    full = false;
    assert.deepEqual(await ingestSpool(engine, dir, cap.log), { ingested: 0, rejected: 0 });
    assert.deepEqual(plugins.of('DEL').length, 2, 'not run again');
  });

  test('the start-up drain releases its container all the same; the file stays for the next pass', async () => {
    const { engine, store } = setup();
    await engine.handle(req('ADD', 'ctr-8', chain));
    fullDisk(store, 'setAttachmentState', () => true);
    const dir = freshDir();
    writeFileSync(join(dir, spoolName(Date.now() - 1000, 'ctr-8', 1)), delWire('ctr-8'));
    const drain = new SpoolDrain(engine, dir, captureLog().log);
    assert.equal(drain.scan(), 1);
    const held = engine.spoolHold?.('ctr-8');
    assert.ok(held, 'the container is held while its spooled DEL waits');
    assert.deepEqual(await drain.start(), { ingested: 0, rejected: 0, kept: 1 });
    await held;
    assert.equal(drain.pending, 0);
    assert.equal(readdirSync(dir).length, 1);
  });

  test("a request's own pass (ingestNames) reports what it kept", async () => {
    const { engine, store } = setup();
    await engine.handle(req('ADD', 'ctr-5', chain));
    fullDisk(store, 'setAttachmentState', () => true);
    const dir = freshDir();
    const name = spoolName(1, 'ctr-5', 1);
    writeFileSync(join(dir, name), delWire('ctr-5'));
    assert.deepEqual(await ingestNames(engine, dir, [name], captureLog().log), { ingested: 0, rejected: 0, kept: 1 });
    assert.deepEqual(readdirSync(dir), [name]);
  });
});

describe('engine: a hold that fails', () => {
  test('fails its request, and the container is no longer held', async () => {
    const { engine } = setup();
    const asked: string[] = [];
    engine.spoolHold = (cid) => {
      asked.push(cid);
      return asked.length === 1 ? Promise.reject(new CniError(11, 'spooled DELs first')) : undefined;
    };
    await assert.rejects(engine.handle(req('ADD', 'h1', chain)), (e: CniError) => e.code === 11);
    // A DEL asks for the hold only while a request of its container is held.
    await engine.handle(req('DEL', 'h1', chain));
    assert.deepEqual(asked, ['h1']);
    assert.equal(await engine.handle(req('ADD', 'h1', chain)).then(() => 'added'), 'added');
    assert.deepEqual(asked, ['h1', 'h1']);
  });
});
