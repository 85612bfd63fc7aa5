// The rig of the admission unit tests (test/unit/admission-*.test.ts): routes/admission.ts's
// Admission (or any listener: openServerRig) on a real HTTP server over a Unix socket in a temp dir,
// without root; a fake serve
// standing in for the engine that records what it served and holds requests until the test answers
// them; clients that write a request's bytes on their own connection, as the shim does; and the CNI
// requests they send. Each test file builds its Admission with its own options, tombstone set and
// fastify stand-in: only what their copies had in common is here.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { CNI_ROUTE, HINT_HEADERS, hintHeaders } from '@cni-steward/shared';
import type { Admission, AdmissionOptions, Handler } from '../../daemon/src/routes/admission.js';

/**
 * Polls `cond` every `everyMs` until it holds or `ms` pass, then asserts it: the bound only ends a
 * wait that fails, it never fails a slow machine early. The clock is Date.now() unless `clock` says
 * otherwise: some tests make performance.now() their own, and it must not stand still under a wait.
 */
export async function until(
  what: string,
  cond: () => boolean,
  ms = 15000,
  o: { everyMs?: number; clock?: () => number } = {},
): Promise<void> {
  const { everyMs = 5, clock = Date.now } = o;
  const end = clock() + ms;
  while (!cond() && clock() < end) await new Promise((r) => setTimeout(r, everyMs));
  assert.ok(cond(), what);
}

export interface CniRequestOptions {
  method?: string;
  target?: string;
  contentType?: string;
  /** Spaces after the JSON, to make the body as large as a test needs. */
  pad?: number;
  /** false leaves out every hint header (a client that is not the shim). */
  hints?: boolean;
  /** Leaves out the container id hint alone. */
  noContainerHint?: boolean;
  /** Transfer-Encoding: chunked instead of a Content-Length (the body is then the caller's to frame). */
  chunked?: boolean;
  /** More headers, after the others. */
  extra?: Record<string, string>;
  /** Header lines to leave out (matched against each `name: value`). */
  drop?: RegExp;
  /** `text` carries the headers and only this much of the body. */
  bodyBytes?: number;
}

/**
 * A CNI request as the shim sends it (hint headers, protocol header, JSON body), or a variant of it:
 * its head (through the blank line), its body, and the text to send.
 */
export function cniRequest(
  command: string,
  containerId: string,
  o: CniRequestOptions = {},
): { head: string; body: string; text: string } {
  const env = { CNI_COMMAND: command, CNI_CONTAINERID: containerId, CNI_IFNAME: 'eth0' };
  const config = { cniVersion: '1.0.0', name: 'net', type: 'steward' };
  const body = JSON.stringify({ env, config }) + ' '.repeat(o.pad ?? 0);
  const headers: Record<string, string | number> = {
    ...(o.hints === false ? {} : hintHeaders(env, config)),
    'content-type': o.contentType ?? 'application/json',
    ...(o.chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': Buffer.byteLength(body) }),
    ...o.extra,
  };
  if (o.noContainerHint) delete headers[HINT_HEADERS.containerId];
  const head =
    `${o.method ?? 'POST'} ${o.target ?? CNI_ROUTE} HTTP/1.1\r\nHost: x\r\n` +
    Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}`)
      .filter((l) => !o.drop?.test(l))
      .map((l) => `${l}\r\n`)
      .join('') +
    '\r\n';
  return { head, body, text: head + body.slice(0, o.bodyBytes ?? body.length) };
}

/** A whole request, as the shim sends it. */
export const whole = (command: string, containerId: string): string => cniRequest(command, containerId).text;

/** The engine's serve, faked: every body is recorded, then answered at once or held until released. */
export interface FakeServe {
  serve: AdmissionOptions['serve'];
  /** `COMMAND containerid` of every body served, in order. */
  served: string[];
  /** The answers of the held requests by container id (a test may answer one of them itself). */
  held: Map<string, Array<(text: string) => void>>;
  /** Answers every held request of a container id with `{}`, and forgets them. */
  release(cid: string): void;
}

/** Holds the requests of the container ids `holds` picks; answers the others with `answer` (`{}`). */
export function fakeServe(holds: (cid: string) => boolean, answer: (cid: string) => string = () => '{}'): FakeServe {
  const served: string[] = [];
  const held = new Map<string, Array<(text: string) => void>>();
  return {
    served,
    held,
    serve: (body, hints) => {
      const cid = (body as { env: { CNI_CONTAINERID: string } }).env.CNI_CONTAINERID;
      served.push(`${hints.command} ${cid}`);
      if (!holds(cid)) return Promise.resolve(answer(cid));
      return new Promise<string>((resolve) => held.set(cid, [...(held.get(cid) ?? []), resolve]));
    },
    release: (cid) => {
      for (const a of held.get(cid) ?? []) a('{}');
      held.delete(cid);
    },
  };
}

export interface Answer {
  status: number;
  body: string;
}

/** A client's connection to the rig: what the server answered on it, and whether it closed. */
export interface Conn {
  sock: Socket;
  /** The status codes answered on this connection so far. */
  statuses(): number[];
  /** The answers received so far, framed by Content-Length (one begun without it: its head alone). */
  answers(): Answer[];
  /** Everything answered on this connection so far. */
  text(): string;
  closed(): boolean;
  /** performance.now() when the connection closed (undefined while open). */
  closedAt(): number | undefined;
}

/** Parses the answers received so far on a connection (Content-Length framed, or a head alone). */
function parseAnswers(got: string): Answer[] {
  const out: Answer[] = [];
  let at = 0;
  while (at < got.length) {
    const headEnd = got.indexOf('\r\n\r\n', at);
    if (headEnd < 0) break;
    const head = got.slice(at, headEnd);
    const status = Number(/^HTTP\/1\.1 (\d+)/.exec(head)?.[1] ?? 0);
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (!length) {
      out.push({ status, body: '' }); // an answer begun without a length: its head is all we use
      break;
    }
    const end = headEnd + 4 + Number(length[1]);
    if (end > got.length) break;
    out.push({ status, body: got.slice(headEnd + 4, end) });
    at = end;
  }
  return out;
}

export interface ServerRigOptions {
  /** The temp dir's name prefix, one per test file. */
  tmpPrefix: string;
  /** What serves every request. */
  listener: Handler;
  /**
   * Status lines found anywhere in what a connection received, not only at the start of a line: a
   * pipelined answer follows the body before it on the same line.
   */
  statusesAnywhere?: boolean;
  /** Told of each connection the server accepts, before any request on it reaches the listener. */
  onConnection?: (sock: Socket) => void;
}

export interface ServerRig {
  /** Server-side requests in arrival order. */
  reqs: IncomingMessage[];
  /** Writes `text` on a connection of its own; `onData` is told of every chunk answered on it. */
  send(text: string, onData?: (c: Conn) => void): Conn;
  /** Open connections on the server. */
  connections(): Promise<number>;
  /** Closes every connection and the server, and removes the temp dir. */
  close(): Promise<void>;
}

export interface RigOptions extends Omit<ServerRigOptions, 'listener'> {
  admission: Admission;
  /** The fake serve `admission` was built with. */
  engine: FakeServe;
  /** The stand-in for fastify's handler: what the admission hands on. */
  next: Handler;
}

export interface AdmissionRig extends ServerRig {
  admission: Admission;
  /** `COMMAND containerid` of every body served, in order. */
  served: string[];
  /** Answers the held requests of a container id. */
  release(cid: string): void;
  heldCount(cid: string): number;
  isHeld(cid: string): boolean;
  /** No request in flight, admitted or waiting. */
  atRest(): boolean;
  /** Answers what is held, closes every connection and the server, and removes the temp dir. */
  close(): Promise<void>;
}

/** Listens with `o.listener` on a socket in a temp dir of its own; close() undoes it all, pass or fail. */
export async function openServerRig(o: ServerRigOptions): Promise<ServerRig> {
  const dir = mkdtempSync(join(tmpdir(), o.tmpPrefix));
  const socket = join(dir, 's.sock');
  const reqs: IncomingMessage[] = [];
  const conns: Conn[] = [];
  const server = createServer((req, res) => {
    reqs.push(req);
    o.listener(req, res);
  });
  if (o.onConnection) server.on('connection', o.onConnection);
  await new Promise<void>((r) => server.listen(socket, r));
  const statusLine = o.statusesAnywhere ? /HTTP\/1\.1 (\d{3}) /g : /^HTTP\/1\.1 (\d+)/gm;
  return {
    reqs,
    send(text, onData) {
      const sock = connect(socket);
      let got = '';
      let closedAt: number | undefined;
      const c: Conn = {
        sock,
        statuses: () => [...got.matchAll(statusLine)].map((m) => Number(m[1])),
        answers: () => parseAnswers(got),
        text: () => got,
        closed: () => closedAt !== undefined,
        closedAt: () => closedAt,
      };
      conns.push(c);
      sock.on('data', (b: Buffer) => {
        got += b.toString('latin1');
        onData?.(c);
      });
      sock.on('error', () => undefined);
      sock.once('close', () => (closedAt = performance.now()));
      sock.write(text);
      return c;
    },
    connections: () => new Promise((r, j) => server.getConnections((e, n) => (e ? j(e) : r(n)))),
    close: async () => {
      for (const c of conns) c.sock.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Listens with `o.admission` on a socket in a temp dir of its own; close() undoes it all, pass or fail. */
export async function openRig(o: RigOptions): Promise<AdmissionRig> {
  const { admission, engine } = o;
  const base = await openServerRig({ ...o, listener: admission.listener(o.next) });
  return {
    ...base,
    admission,
    served: engine.served,
    release: engine.release,
    heldCount: (cid) => (engine.held.get(cid) ?? []).length,
    isHeld: (cid) => engine.held.has(cid),
    atRest: () => {
      const s = admission.stats;
      return s.othersInFlight === 0 && s.delsAdmitted === 0 && s.delsWaiting === 0;
    },
    close: async () => {
      for (const cid of [...engine.held.keys()]) engine.release(cid);
      await base.close();
    },
  };
}
