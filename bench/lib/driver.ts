// A driver: one of bench/lib/*-driver.ts forked with tsx, so the load it makes (a DEL storm, shim
// execs, a scrape flood) does not share an event loop with the latencies its row measures. Every
// driver speaks the same messages: {type: 'order', order} answered by {type: 'ready'}, then each
// command ({type: 'go'}, ...) answered by a message of the type its row names ({type: 'done', report}).

import { fork } from 'node:child_process';
import { basename } from 'node:path';
import type { Scratch } from './scratch.js';

export interface DriverMessage<R> {
  type: string;
  report?: R;
}

export interface Driver<R> {
  /**
   * Sends {type: command} and resolves with the driver's first message of type `reply`; rejects if
   * the driver fails first (exits other than 0, or cannot be sent to) or, given `timeoutMs`, sends
   * no such message in time.
   */
  ask(command: string, reply: string, timeoutMs?: number): Promise<DriverMessage<R>>;
  /** Ends the driver: {type: 'exit'}, or a kill when its channel is already closed. */
  exit(): void;
}

/** Forks `file` (a URL's path) and hands it `order`; resolves once it is ready. Killed at env.close(). */
export async function forkDriver<O, R>(env: Scratch, file: string, order: O): Promise<Driver<R>> {
  const name = basename(file, '.ts');
  const child = fork(file, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  env.defer(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  // A send on a closed channel is an 'error' event: reported to the ask waiting, never thrown.
  child.on('error', () => undefined);
  const send = (message: object, reply: string, timeoutMs?: number) =>
    new Promise<DriverMessage<R>>((resolve, reject) => {
      const settle = () => {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
        child.off('error', onError);
      };
      const fail = (why: string) => {
        settle();
        reject(new Error(`${name} ${why}`));
      };
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => fail(`sent no ${reply} within ${timeoutMs} ms`), timeoutMs);
      const onExit = (code: number | null, signal: string | null) => {
        if (code !== 0) fail(`exited with ${code ?? signal} before its ${reply}`);
      };
      const onError = (e: Error) => fail(`failed: ${e.message}`);
      const onMessage = (m: DriverMessage<R>) => {
        if (m.type !== reply) return;
        settle();
        resolve(m);
      };
      child.on('message', onMessage);
      child.on('exit', onExit);
      child.on('error', onError);
      child.send(message);
    });
  await send({ type: 'order', order }, 'ready');
  return {
    ask: (command, reply, timeoutMs) => send({ type: command }, reply, timeoutMs),
    exit: () => {
      if (child.connected) child.send({ type: 'exit' });
      else if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
