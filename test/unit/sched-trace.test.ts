// bench/lib/sched-trace.ts: a process timeline read from `perf script` lines, and the CNI calls in
// it split into their parts. The trace below is one pod's ADD and its two DELs through steward, and
// the same three through the plain chain, written as perf 6.1 prints them (times in seconds).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  callLabel,
  descendants,
  directCalls,
  parsePerfScript,
  stewardCalls,
  summarise,
  type CallShape,
} from '../../bench/lib/sched-trace.js';

const SHAPE: CallShape = { chain: ['bridge', 'portmap'], runtime: 'containerd', shim: 'steward' };

/** One perf script line: comm pid/tid seconds: event: fields (t in ms). */
const at = (comm: string, pid: number, tid: number, ms: number, event: string, fields: string) =>
  `${comm.padStart(16)} ${pid}/${tid} ${(ms / 1000).toFixed(6)}: ${event.padStart(26)}: ${fields}`;
const fork = (comm: string, parent: number, child: number, ms: number) =>
  at(
    comm,
    parent,
    parent,
    ms,
    'sched:sched_process_fork',
    `comm=${comm} pid=${parent} child_comm=${comm} child_pid=${child}`,
  );
const exec = (comm: string, pid: number, ms: number, file: string) =>
  at(comm, pid, pid, ms, 'sched:sched_process_exec', `filename=${file} pid=${pid} old_pid=${pid}`);
const exit = (comm: string, pid: number, ms: number, tid = pid) =>
  at(comm, pid, tid, ms, 'sched:sched_process_exit', `comm=${comm} pid=${tid} prio=120 group_dead=${tid !== pid}`);
const connect = (comm: string, pid: number, tid: number, ms: number) =>
  at(comm, pid, tid, ms, 'syscalls:sys_enter_connect', 'fd: 0x00000007, uservaddr: 0x39e976fc210, addrlen: 0x0000003b');

const CONTAINERD = 500;
const SPAWNER = 600;

/** A shim call from `t`: its delegates forked by the spawner at the given offsets [name, fork, exec, exit]. */
function shimCall(
  pid: number,
  t: number,
  connectAt: number,
  exitAt: number,
  delegates: [string, number, number, number][],
) {
  const lines = [
    fork('containerd', CONTAINERD, pid, t),
    exec('steward', pid, t + 0.2, '/opt/cni/bin/steward'),
    // A thread of the shim: its fork and exit are no call of their own; its connect is the shim's.
    fork('steward', pid, pid + 1, t + 0.5),
    connect('steward', pid, pid + 1, t + connectAt),
    connect('steward', pid, pid, t + connectAt + 1),
  ];
  delegates.forEach(([name, f, e, x], i) => {
    const d = pid + 10 + i;
    lines.push(
      fork('MainThread', SPAWNER, d, t + f),
      exec(name, d, t + e, `/usr/lib/cni/${name}`),
      exit(name, d, t + x),
    );
  });
  lines.push(exit('steward', pid, t + exitAt, pid + 1), exit('steward', pid, t + exitAt));
  return lines;
}

/** A plain-chain call from `t`: containerd forks each plugin itself. */
function plainCall(pid: number, t: number, plugins: [string, number, number, number][]) {
  return plugins.flatMap(([name, f, e, x], i) => [
    fork('containerd', CONTAINERD, pid + i, t + f),
    exec(name, pid + i, t + e, `/tmp/cri-bin/${name}`),
    exit(name, pid + i, t + x),
  ]);
}

const TRACE = [
  'some header perf prints that is no event line',
  ...shimCall(1000, 100, 1.8, 24, [
    ['bridge', 5, 5.5, 15],
    ['portmap', 17, 17.5, 21],
  ]),
  // bridge's own child: forked by bridge, not the runtime or the spawner; no call of its own.
  fork('bridge', 1010, 1020, 108),
  exec('host-local', 1020, 108.2, '/usr/lib/cni/host-local'),
  exit('host-local', 1020, 110),
  ...shimCall(2000, 200, 1.5, 30, [
    ['portmap', 4, 4.5, 7],
    ['bridge', 9, 9.5, 28],
  ]),
  ...shimCall(3000, 300, 1.4, 3, []),
  // The bench's own exec of the shim (VERSION): forked by node, not by the runtime.
  fork('node', 700, 3500, 350),
  exec('steward', 3500, 350.2, '/opt/cni/bin/steward'),
  exit('steward', 3500, 351.5),
  ...plainCall(4000, 400, [
    ['bridge', 0, 0.2, 10],
    ['portmap', 11, 11.2, 13.5],
  ]),
  ...plainCall(5000, 500, [
    ['portmap', 0, 0.2, 2.5],
    ['bridge', 3, 3.2, 21],
  ]),
  ...plainCall(6000, 600, [
    ['portmap', 0, 0.2, 2.2],
    ['bridge', 3, 3.2, 8],
  ]),
].join('\n');

test('the timeline: fork (by whom), last exec, main thread exit and first connect of each process', () => {
  const procs = parsePerfScript(TRACE);
  assert.deepEqual(procs.get(1000), {
    pid: 1000,
    fork: 100,
    parent: CONTAINERD,
    parentComm: 'containerd',
    exec: 100.2,
    file: '/opt/cni/bin/steward',
    connect: 101.8,
    exit: 124,
  });
  // A thread is seen forked and exiting, never exec'ing.
  assert.equal(procs.get(1001)?.file, undefined);
  assert.equal(procs.get(1010)?.parentComm, 'MainThread');
  assert.equal(procs.get(1020)?.parent, 1010);
});

test('steward calls: the shim the runtime forked, split into its start, the daemon, each delegate and the way back', () => {
  const calls = stewardCalls(parsePerfScript(TRACE), SHAPE);
  assert.deepEqual(
    calls.map((c) => [callLabel(c), c.kind, c.total]),
    [
      ['ADD', 'ADD', 24],
      ['DEL 1', 'DEL', 30],
      ['DEL 2', 'none', 3],
    ],
  );
  const add = calls[0]!;
  const parts = Object.fromEntries(add.parts);
  assert.deepEqual(
    add.parts.map(([n]) => n),
    [
      'shim fork → exec',
      'shim exec → connect',
      'connect → first delegate forked',
      'bridge fork → exec',
      'bridge exec → exit',
      'bridge exit → portmap forked',
      'portmap fork → exec',
      'portmap exec → exit',
      'last delegate exit → shim exit',
    ],
  );
  assert.ok(Math.abs(parts['shim exec → connect']! - 1.6) < 1e-6);
  assert.ok(Math.abs(parts['connect → first delegate forked']! - 3.2) < 1e-6);
  assert.ok(Math.abs(parts['bridge exit → portmap forked']! - 2) < 1e-6);
  assert.ok(Math.abs(parts['last delegate exit → shim exit']! - 3) < 1e-6);
  // The delegates each call ran, in order, and what bridge itself started (host-local) under it.
  assert.deepEqual(
    calls.map((c) => c.delegates.map((d) => d.pid)),
    [[1010, 1011], [2010, 2011], []],
  );
  const procs = parsePerfScript(TRACE);
  const tree = descendants(procs);
  assert.deepEqual([...tree(procs.get(1010)!)], [1010, 1020]);
  assert.deepEqual([...tree(procs.get(1011)!)], [1011]);
  // The parts make the whole.
  for (const c of calls)
    assert.ok(Math.abs(c.parts.reduce((a, [, ms]) => a + ms, 0) - c.total) < 1e-6, `${callLabel(c)} adds up`);
});

test('plain-chain calls: the runtime forks the chain in order (ADD) or reversed (DEL), one plugin after the other', () => {
  const calls = directCalls(parsePerfScript(TRACE), SHAPE);
  assert.deepEqual(
    calls.map((c) => [callLabel(c), c.kind, c.total]),
    [
      ['ADD', 'ADD', 13.5],
      ['DEL 1', 'DEL', 21],
      ['DEL 2', 'DEL', 8],
    ],
  );
  assert.deepEqual(
    calls[0]!.parts.map(([n]) => n),
    [
      'bridge fork → exec',
      'bridge exec → exit',
      'bridge exit → portmap forked',
      'portmap fork → exec',
      'portmap exec → exit',
    ],
  );
  // Two plugins of the chain that overlap are not one call.
  const overlapping = [
    ...plainCall(7000, 700, [
      ['bridge', 0, 0.2, 10],
      ['portmap', 5, 5.2, 12],
    ]),
  ].join('\n');
  assert.deepEqual(directCalls(parsePerfScript(overlapping), SHAPE), []);
});

test('summarise: medians by label, steward beside the plain chain', () => {
  const procs = parsePerfScript(TRACE);
  const s = summarise(stewardCalls(procs, SHAPE), directCalls(procs, SHAPE));
  assert.deepEqual(
    s.map((x) => [x.label, x.steward, x.direct, x.stewardCalls, x.directCalls]),
    [
      ['ADD', 24, 13.5, 1, 1],
      ['DEL 1', 30, 21, 1, 1],
      ['DEL 2', 3, 8, 1, 1],
    ],
  );
  assert.equal(s[2]!.stewardParts.at(-1)?.[0], 'connect → shim exit');
});

test('a pid forked again: the earlier holder is kept, lookups find the latest, and a process tree holds what it started while it lived', () => {
  const trace = [
    // containerd forks bridge (1010), which forks host-local (1020); both exit by 20.
    fork('containerd', CONTAINERD, 1010, 10),
    exec('bridge', 1010, 10.2, '/tmp/cri-bin/bridge'),
    fork('bridge', 1010, 1020, 12),
    exec('host-local', 1020, 12.2, '/tmp/cri-bin/host-local'),
    exit('host-local', 1020, 14),
    exit('bridge', 1010, 20),
    // 1010 again, later: a shell forked by containerd, which forks 1030 (not bridge's).
    fork('containerd', CONTAINERD, 1010, 30),
    exec('sh', 1010, 30.2, '/bin/sh'),
    fork('sh', 1010, 1030, 31),
    exit('sh', 1010, 40),
  ].join('\n');
  const procs = parsePerfScript(trace);
  const bridge = [...procs.values()].find((p) => p.file === '/tmp/cri-bin/bridge');
  assert.deepEqual(
    [bridge?.pid, bridge?.fork, bridge?.parent, bridge?.exit],
    [1010, 10, CONTAINERD, 20],
    'the earlier holder, whole',
  );

  assert.equal(procs.get(1010)?.file, '/bin/sh');
  const tree = descendants(procs);
  assert.deepEqual([...tree(bridge!)], [1010, 1020]);
  assert.deepEqual([...tree(procs.get(1010)!)], [1010, 1030]);
});
