// bench/lib/sched-states.ts: where a process's time went between two instants (on a CPU, waiting
// for one, asleep), read from the scheduler's tracepoints as perf 6.1 prints them, and who held the
// CPUs while it waited.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseStates, splitStates } from '../../bench/lib/sched-states.js';

/** One perf script line: comm pid/tid seconds: event: fields (t in ms). */
const at = (comm: string, pid: number, tid: number, ms: number, event: string, fields: string) =>
  `${comm.padStart(16)} ${pid}/${tid} ${(ms / 1000).toFixed(6)}: ${event.padStart(26)}: ${fields}`;

/** `prev` leaves the CPU in `state` (R: preempted; S, D: it sleeps) for `next`. */
const sw = (prev: [string, number, number], state: string, next: [string, number], ms: number) =>
  at(
    prev[0],
    prev[1],
    prev[2],
    ms,
    'sched:sched_switch',
    `prev_comm=${prev[0]} prev_pid=${prev[2]} prev_prio=120 prev_state=${state} ==> next_comm=${next[0]} next_pid=${next[1]} next_prio=120`,
  );
const wake = (waker: [string, number, number], woken: [string, number], ms: number, event = 'sched:sched_wakeup') =>
  at(waker[0], waker[1], waker[2], ms, event, `comm=${woken[0]} pid=${woken[1]} prio=120 target_cpu=001`);

const IDLE: [string, number, number] = ['swapper/0', 0, 0];
const BRIDGE = 100;
const BRIDGE_T2 = 101;
const HOST_LOCAL = 110;
const NODE = 200;

// bridge (pid 100, a second thread 101) and its child host-local (110) from 10 to 30 ms, with a
// node process (200) taking a CPU from it for a while.
const TRACE = [
  'a header line perf prints',
  // 10: bridge is woken as it is forked, then runs.
  wake(['containerd', 50, 50], ['bridge', BRIDGE], 10, 'sched:sched_wakeup_new'),
  sw(IDLE, 'R', ['bridge', BRIDGE], 11),
  // 13: node preempts it: bridge waits for the CPU until 16.
  sw(['bridge', BRIDGE, BRIDGE], 'R', ['node', NODE], 13),
  sw(['node', NODE, NODE], 'S', ['bridge', BRIDGE], 16),
  // 17: its second thread runs beside it on the other CPU until 18, then sleeps.
  sw(IDLE, 'R', ['bridge', BRIDGE_T2], 17),
  sw(['bridge', BRIDGE, BRIDGE_T2], 'S', ['swapper/1', 0], 18),
  // 19: bridge forks host-local and waits for it (asleep); host-local runs 19.5-21.
  wake(['bridge', BRIDGE, BRIDGE], ['host-local', HOST_LOCAL], 19, 'sched:sched_wakeup_new'),
  sw(['bridge', BRIDGE, BRIDGE], 'S', ['host-local', HOST_LOCAL], 19.5),
  // 21: host-local exits; bridge is woken and runs at 21.
  wake(['host-local', HOST_LOCAL, HOST_LOCAL], ['bridge', BRIDGE], 21),
  sw(['host-local', HOST_LOCAL, HOST_LOCAL], 'X', ['bridge', BRIDGE], 21),
  // 22-25: asleep (a netlink answer), then ready at 25 while node holds the CPU till 26.
  sw(['bridge', BRIDGE, BRIDGE], 'S', ['node', NODE], 22),
  wake(['node', NODE, NODE], ['bridge', BRIDGE], 25),
  sw(['node', NODE, NODE], 'S', ['bridge', BRIDGE], 26),
  // 29: bridge exits.
  sw(['bridge', BRIDGE, BRIDGE], 'X', ['swapper/0', 0], 29),
].join('\n');

test('a thread is known by its process, from any line that shows it as the current task', () => {
  const tl = parseStates(TRACE);
  const number = (tid: number) => [...tl.kernelTid].find(([, k]) => k === tid)?.[0] as number;
  assert.equal(tl.tgid.get(number(BRIDGE_T2)), BRIDGE);
  assert.equal(tl.tgid.get(number(HOST_LOCAL)), HOST_LOCAL);
  assert.equal(tl.comm.get(number(NODE)), 'node');
});

test('a window splits into on a CPU, waiting for one and asleep, a child process counted with its parent', () => {
  const tl = parseStates(TRACE);
  const [whole, alone] = splitStates(tl, [
    { pids: new Set([BRIDGE, HOST_LOCAL]), from: 10, to: 30 },
    { pids: new Set([BRIDGE]), from: 10, to: 30 },
  ]);
  const close = (a: number, b: number, what: string) => assert.ok(Math.abs(a - b) < 1e-9, `${what}: ${a} ≠ ${b}`);
  // On a CPU: 11-13, 16-19.5, host-local 19.5-21, 21-22, 26-29.
  close(whole!.onCpu, 2 + 3.5 + 1.5 + 1 + 3, 'on a CPU');
  // Waiting: 10-11 (woken, not yet run), 13-16 and 25-26 while node held the CPU.
  close(whole!.waiting, 1 + 3 + 1, 'waiting');
  // Asleep: 22-25 and 29-30 (exited).
  close(whole!.asleep, 3 + 1, 'asleep');
  close(whole!.onCpu + whole!.waiting + whole!.asleep, 20, 'the whole window');
  // Who held the CPUs while it waited: node for 4 ms; the idle CPU is nobody.
  assert.deepEqual(Object.keys(whole!.heldBy), ['node']);
  close(whole!.heldBy.node!, 4, 'node');
  // Without its child, bridge sleeps while host-local runs.
  close(alone!.onCpu, whole!.onCpu - 1.5, 'bridge alone on a CPU');
  close(alone!.asleep, whole!.asleep + 1.5, 'bridge alone asleep');
});

test('windows are independent: one inside the trace, one after it, one before any change', () => {
  const tl = parseStates(TRACE);
  const [inside, after, before] = splitStates(tl, [
    { pids: new Set([BRIDGE]), from: 14, to: 17 },
    { pids: new Set([BRIDGE]), from: 40, to: 45 },
    { pids: new Set([BRIDGE]), from: 0, to: 5 },
  ]);
  // 14-16 waiting (node holds the CPU), 16-17 on a CPU.
  assert.deepEqual([inside!.onCpu, inside!.waiting, inside!.asleep], [1, 2, 0]);
  assert.deepEqual([after!.onCpu, after!.waiting, after!.asleep], [0, 0, 5]);
  assert.deepEqual([before!.onCpu, before!.waiting, before!.asleep], [0, 0, 5]);
});

test('a thread woken while it is still on its CPU runs on; one preempted waits', () => {
  const tl = parseStates(
    [
      wake(['containerd', 50, 50], ['bridge', BRIDGE], 0, 'sched:sched_wakeup_new'),
      sw(IDLE, 'R', ['bridge', BRIDGE], 1),
      // 2: woken before it switched out (it had set itself asleep on a lock another CPU then freed).
      wake(['node', NODE, NODE], ['bridge', BRIDGE], 2),
      // 4: preempted by node; 6: back.
      sw(['bridge', BRIDGE, BRIDGE], 'R+', ['node', NODE], 4),
      sw(['node', NODE, NODE], 'S', ['bridge', BRIDGE], 6),
    ].join('\n'),
  );
  const [s] = splitStates(tl, [{ pids: new Set([BRIDGE]), from: 1, to: 8 }]);
  assert.deepEqual([s!.onCpu, s!.waiting, s!.asleep], [5, 2, 0]);
});

test("with the CPU field: a switch that never reached the trace, and a dying thread's last switch printed as ':-1 pid/-1'", () => {
  // perf script -F comm,pid,tid,cpu,time,event,trace.
  const on = (cpu: number, comm: string, pid: number, tid: number, ms: number, fields: string) =>
    `${comm.padStart(16)} ${pid}/${tid} [${String(cpu).padStart(3, '0')}] ${(ms / 1000).toFixed(6)}: ${'sched:sched_switch'.padStart(26)}: ${fields}`;
  const swOn = (cpu: number, prev: [string, number, number], state: string, next: [string, number], ms: number) =>
    on(
      cpu,
      prev[0],
      prev[1],
      prev[2],
      ms,
      `prev_comm=${prev[0]} prev_pid=${prev[2]} prev_prio=120 prev_state=${state} ==> next_comm=${next[0]} next_pid=${next[1]} next_prio=120`,
    );
  const AGENT = 300;
  const tl = parseStates(
    [
      // 1: bridge runs on CPU 0; 2: the agent takes CPU 1, and its switch out at 3 is never traced.
      swOn(0, IDLE, 'R', ['bridge', BRIDGE], 1),
      swOn(1, ['swapper/1', 0, 0], 'R', ['wall-clock', AGENT], 2),
      // 4: node is seen leaving CPU 1 (so the agent had left it); 5: bridge is preempted by node.
      swOn(1, ['node', NODE, NODE], 'S', ['swapper/1', 0], 4),
      swOn(0, ['bridge', BRIDGE, BRIDGE], 'R', ['node', NODE], 5),
      // 6: bridge's second thread runs on CPU 1 (6.5: it wakes node, running already), and dies at 7:
      // that last switch names no tid.
      swOn(1, ['swapper/1', 0, 0], 'R', ['bridge', BRIDGE_T2], 6),
      wake(['bridge', BRIDGE, BRIDGE_T2], ['node', NODE], 6.5),
      on(
        1,
        ':-1',
        BRIDGE,
        -1,
        7,
        `prev_comm=bridge prev_pid=${BRIDGE_T2} prev_prio=120 prev_state=X ==> next_comm=swapper/1 next_pid=0 next_prio=120`,
      ),
    ].join('\n'),
  );
  assert.equal(tl.tgid.get(-1), undefined, 'the dying line names no thread');
  // 4.5-5 on CPU 0, 5-6 waiting while node runs, 6-7 its second thread on CPU 1, 7-9 waiting again
  // (that thread is gone); the agent no longer counted on CPU 1 once node was seen leaving it.
  const [s] = splitStates(tl, [{ pids: new Set([BRIDGE]), from: 4.5, to: 9 }]);
  assert.deepEqual([s!.onCpu, s!.waiting, s!.asleep], [1.5, 3, 0]);
  assert.deepEqual(s!.heldBy, { node: 3 });
});

test('a thread id forked again is another thread: what its first holder did is not counted for the second', () => {
  const fork = (parent: [string, number, number], child: number, ms: number) =>
    at(
      parent[0],
      parent[1],
      parent[2],
      ms,
      'sched:sched_process_fork',
      `comm=${parent[0]} pid=${parent[1]} child_comm=${parent[0]} child_pid=${child}`,
    );
  const OTHER = 900;
  const tl = parseStates(
    [
      // bridge (100) runs 1-5 and exits; at 6 process 900 forks a thread that gets id 100 again.
      sw(IDLE, 'R', ['bridge', BRIDGE], 1),
      sw(['bridge', BRIDGE, BRIDGE], 'X', ['swapper/0', 0], 5),
      fork(['other', OTHER, OTHER], BRIDGE, 6),
      wake(['other', OTHER, OTHER], ['other', BRIDGE], 6, 'sched:sched_wakeup_new'),
      sw(IDLE, 'R', ['other', BRIDGE], 7),
      wake(['other', OTHER, BRIDGE], ['node', NODE], 8),
      sw(['other', OTHER, BRIDGE], 'S', ['swapper/0', 0], 9),
    ].join('\n'),
  );
  const [bridge, other] = splitStates(tl, [
    { pids: new Set([BRIDGE]), from: 0, to: 10 },
    { pids: new Set([OTHER]), from: 0, to: 10 },
  ]);
  // bridge ran 1-5 only; the thread 100 of 900 was ready 6-7 and ran 7-9.
  assert.deepEqual([bridge!.onCpu, bridge!.waiting, bridge!.asleep], [4, 0, 6]);
  assert.deepEqual([other!.onCpu, other!.waiting, other!.asleep], [2, 1, 7]);
});
