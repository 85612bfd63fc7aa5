// Admission of CNI requests at the HTTP server, before fastify routes a request or parses its body.
// One concern: when a request may go on and when it is cut off; serving it is raw-cni.ts's or fastify's.
// A request carrying the shim's hint headers (routes/hints.ts) names its command up front, so a
// DEL storm (a runtime retrying StopPodSandbox for hundreds of pods) cannot keep ADDs waiting:
//
//  - DELs for the engine are admitted at most `maxDels` at a time (`maxDelsWhileAdding` while an
//    ADD, CHECK or any other hinted request is in flight), DELs answered from a tombstone at most 2
//    (1); the others wait with only their headers parsed, each kind in arrival order, and are
//    admitted as admitted ones are answered. A DEL of a container with a hinted ADD or CHECK in
//    flight is admitted at once, uncapped: it waits in the engine's queue behind that request, not
//    in a slot; so is a DEL of a container with a DEL already admitted for the engine (it joins
//    that DEL or waits behind it in the container's queue). Every DEL is still answered.
//  - While ADDs are being served (one in flight, or one answered within the last `priorityMs`), DELs
//    answered from a tombstone are paced to one per `tombstonePaceMs`. A storm's repeated DELs are
//    cheap for the daemon, but their senders are not: a client that retries as fast as it is answered
//    takes the CPU a pod's ADD (its plugins, its runtime) needs. Without ADDs they go at full speed.
//  - Only the exact target POST /v1/cni is the CNI route: another spelling of it (query, fragment,
//    percent-encoding, absolute form, extra slashes) is refused with code 6 (routes/cni-route.ts).
//  - A hinted JSON request to exactly POST /v1/cni is served from its raw body (routes/raw-cni.ts):
//    serveCni, the route's own code, without fastify's routing, hooks and body parser (about 0.2 ms
//    of a request's 0.4 ms before the engine). A DEL whose attachment the engine already tore down
//    (its tombstone set) is answered at once.
//  - Every request without hints (an older shim, curl) or not sent as JSON goes to fastify
//    unchanged. The body stays the contract: hints that disagree with it are refused (code 4).

import type { IncomingMessage, ServerResponse } from 'node:http';
import { CniError, ErrorCode } from '@cni-steward/shared';
import { cniRequestTarget, refuseCniVariant } from './cni-route.js';
import { writeCniError, writeJsonAnswer } from './http-status.js';
import { hintValues, readHints, type Hints } from './hints.js';
import { admitProtocol } from './protocol.js';
import { isRawJson, serveRawCni } from './raw-cni.js';
import { whenDone } from './when-done.js';

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * How long a request's body may take from the moment its headers are in, any request on any path
 * (armBodyDeadline), the degraded daemon's too. The shim writes the body with its headers in one go,
 * so only a stalled or hostile client comes near it; one that did would hold its DEL slot (or count
 * as an ADD in flight) until node:http's request timeout.
 */
export const BODY_DEADLINE_MS = 5000;

/**
 * Closes the connection of a request answered before its body came, if the body is still owed
 * `ms` after its answer was written (`finishedAt`, performance.now()). node:http reads such a body
 * only from then: a pipelined answer waits for those ahead of it (left alone, however long they
 * take), and its body for it, held back by node itself. An answer on the socket that is not
 * written out a second later is not being read: its client reads nothing and sends nothing.
 */
function closeIfBodyOwed(req: IncomingMessage, res: ServerResponse, ms: number, finishedAt?: number): void {
  const close = () => {
    if (!req.complete) req.socket.destroy();
  };
  const closeIn = (wait: number) => (wait > 0 ? void setTimeout(close, wait).unref() : close());
  if (finishedAt !== undefined) return closeIn(finishedAt + ms - performance.now());
  // Not reached while armBodyDeadline notes every finish first; kept because a finished answer
  // would otherwise wait below for a 'finish' (or a 'socket') that never comes again.
  if (res.writableFinished) return closeIn(ms);
  res.once('finish', () => closeIn(ms));
  const unread = () =>
    void setTimeout(() => {
      if (!res.writableFinished) close();
    }, 1000).unref();
  if (res.socket) unread();
  else res.once('socket', unread);
}

/**
 * Whether a request's body is stalled: not all in, and less of it buffered than either its length
 * or what node:http buffers before it stops reading (a parked request's body waits unread; a full
 * buffer is that, not a stall).
 */
function bodyStalled(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = Number(req.headers['content-length'] ?? Number.POSITIVE_INFINITY);
  return req.readableLength < Math.min(length, req.readableHighWaterMark);
}

export interface BodyDeadline {
  ms: number;
  /** Whether the request is answered as a CNI request when cut (code 11), else 408. */
  cni: boolean;
  /** Whether the request waits for admission (parked), noting that it gets a deadline of its own once admitted. */
  waiting?(req: IncomingMessage): boolean;
  /** Told of a request cut, once its answer (if none had begun) is queued. */
  onCut?(req: IncomingMessage): void;
}

/**
 * Ends a request whose body has not come `ms` after its headers, on whichever path it is (parked,
 * served raw, or handed to fastify): answered when nothing was answered yet (a CNI request 11, any
 * other 408), and its connection closed, which releases its counters (whenDone). Every request has
 * one: an unhinted one (curl's) with a short body held its connection, and the descriptors such
 * requests held locked the shim out. A request whose body fills node's buffer unread is no stall:
 * waiting for admission it gets a deadline from its admission, and anywhere else one more `ms`
 * (its handler left it unread).
 */
export function armBodyDeadline(req: IncomingMessage, res: ServerResponse, o: BodyDeadline): void {
  let finishedAt: number | undefined;
  let extended = false;
  const fire = () => {
    if (req.complete || req.socket.destroyed) return;
    // Answered before its body came (a 404, a refusal): the rest of it would hold the connection.
    if (res.writableEnded) return closeIfBodyOwed(req, res, o.ms, finishedAt);
    if (!bodyStalled(req) && !extended) {
      if (o.waiting?.(req)) return;
      extended = true;
      timer = setTimeout(fire, o.ms);
      timer.unref();
      return;
    }
    cutRequest(req, res, o);
  };
  let timer = setTimeout(fire, o.ms);
  timer.unref();
  whenDone(req, res, () => {
    if (req.complete || req.socket.destroyed) clearTimeout(timer);
    else if (res.writableFinished) finishedAt = performance.now();
  });
}

/** Answers a request cut at its deadline (unless its answer has begun) and closes its connection. */
function cutRequest(req: IncomingMessage, res: ServerResponse, o: BodyDeadline): void {
  const sock = req.socket;
  if (!res.headersSent) {
    res.once('finish', () => sock.destroy());
    const why = `request body not received within ${o.ms} ms`;
    if (o.cni) writeCniError(res, new CniError(ErrorCode.TryAgainLater, why), undefined);
    else writeJsonAnswer(res, 408, JSON.stringify({ error: why }));
  }
  setTimeout(() => sock.destroy(), 1000).unref(); // a client that does not read its answer either
  o.onCut?.(req);
}

/**
 * The listener of a server without admission (the degraded daemon's, server.ts): every request
 * under the body deadline all the same.
 */
export function withBodyDeadline(next: Handler, ms = BODY_DEADLINE_MS): Handler {
  return (req, res) => {
    armBodyDeadline(req, res, { ms, cni: cniRequestTarget(req) === 'exact' });
    next(req, res);
  };
}

export interface AdmissionOptions {
  /** DELs admitted at once while no other hinted request is in flight. */
  maxDels: number;
  /** DELs admitted at once while an ADD (or another non-DEL hinted request) is in flight. */
  maxDelsWhileAdding: number;
  /** While ADDs are being served, at most one DEL answered from a tombstone per this many ms. */
  tombstonePaceMs: number;
  /** ADDs count as being served for this long after the last one is answered. */
  priorityMs: number;
  maxBodyBytes: number;
  /** How long a request's body may take (BODY_DEADLINE_MS unless a test says otherwise). */
  bodyDeadlineMs?: number;
  /** Whether the engine would answer this DEL from its tombstone set (nothing left to tear down). */
  isTombstoned(h: Hints): boolean;
  /** Whether the engine has an ADD or CHECK of this container queued or running (Engine.hasAddOrCheck). */
  hasAddOrCheck?(containerId: string): boolean;
  /** Serves a request body as POST /v1/cni does (routes/cni.ts serveCni). */
  serve(body: unknown, hints: Hints, clientGone: () => boolean): Promise<string>;
  /** Told the protocol version of a shim request refused for version skew (routes/protocol.ts). */
  onSkew?(shimProtocol: string): void;
}

export interface AdmissionStats {
  delsWaiting: number;
  delsAdmitted: number;
  othersInFlight: number;
  delsAnsweredEarly: number;
  maxDels: number;
  maxDelsWhileAdding: number;
  /** Whether ADDs are being served, so tombstoned DELs are paced. */
  addPriority: boolean;
}

interface Parked {
  req: IncomingMessage;
  res: ServerResponse;
  hints: Hints;
  /** Admitted by pump (counted in delsAdmitted), and whether to be answered from a tombstone. */
  admitted: boolean;
  early: boolean;
  /** Admitted uncapped behind its container's ADD or CHECK in flight (see pump). */
  behind: boolean;
  /** Its body deadline found node's buffer full while it waited: it gets another once admitted. */
  rearm: boolean;
}

/** Counts requests in flight by container id; a container with none has no entry (`has` is "any"). */
function countIn(counts: Map<string, number>, containerId: string | undefined, by: 1 | -1): void {
  if (containerId === undefined) return;
  const n = (counts.get(containerId) ?? 0) + by;
  if (n > 0) counts.set(containerId, n);
  else counts.delete(containerId);
}

export class Admission {
  private delsAdmitted = 0;
  /** Of those, DELs being answered here from a tombstone. */
  private earlyAdmitted = 0;
  /** Of those, DELs admitted uncapped behind their container's ADD or CHECK in flight. */
  private behindAdmitted = 0;
  private answeredEarly = 0;
  private othersInFlight = 0;
  /** Hinted non-DEL requests in flight by container id (a DEL of one of these is uncapped, see pump). */
  private readonly othersByContainer = new Map<string, number>();
  /** DELs admitted for the engine (not answered from a tombstone), by container id (see pump). */
  private readonly engineDelsByContainer = new Map<string, number>();
  private readonly parked: Parked[] = [];
  private next: Handler = () => undefined;
  /** performance.now() when the last ADD (or other hinted non-DEL) was answered. */
  private lastOtherEnded = -Infinity;
  /** performance.now() when the last DEL was admitted to be answered from a tombstone. */
  private lastEarly = -Infinity;
  private paceTimer: NodeJS.Timeout | undefined;

  constructor(private readonly o: AdmissionOptions) {}

  /** The request listener for http.createServer; `next` is fastify's. */
  listener(next: Handler): Handler {
    this.next = next;
    return (req, res) => this.admit(req, res);
  }

  /** What /v1/status shows: DELs waiting and admitted, other hinted requests in flight, DELs served here. */
  get stats(): AdmissionStats {
    return {
      delsWaiting: this.parked.length,
      delsAdmitted: this.delsAdmitted,
      othersInFlight: this.othersInFlight,
      delsAnsweredEarly: this.answeredEarly,
      maxDels: this.o.maxDels,
      maxDelsWhileAdding: this.o.maxDelsWhileAdding,
      addPriority: this.addPriority(performance.now()),
    };
  }

  private addPriority(now: number): boolean {
    return this.othersInFlight > 0 || now - this.lastOtherEnded < this.o.priorityMs;
  }

  /** The body deadline (armBodyDeadline) of a request here: a parked one leaves the queue when cut. */
  private bodyDeadline(req: IncomingMessage, res: ServerResponse, cni = true): void {
    armBodyDeadline(req, res, {
      ms: this.o.bodyDeadlineMs ?? BODY_DEADLINE_MS,
      cni,
      waiting: (r) => {
        const p = this.parked.find((q) => q.req === r);
        if (p) p.rearm = true;
        return p !== undefined;
      },
      onCut: (r) => {
        const i = this.parked.findIndex((p) => p.req === r);
        if (i >= 0) this.parked.splice(i, 1);
        this.pump();
      },
    });
  }

  private admit(req: IncomingMessage, res: ServerResponse): void {
    let hints: Hints | undefined;
    // Only the shim's exact target (routes/cni-route.ts): any other spelling of it (a query string,
    // a fragment, percent-encoding, the absolute form) is refused here, before fastify would route it.
    const target = cniRequestTarget(req);
    this.bodyDeadline(req, res, target === 'exact');
    if (target === 'variant' && refuseCniVariant(req, res)) return;
    if (target === 'exact') {
      try {
        hints = readHints(hintValues(req.rawHeaders));
      } catch {
        // Malformed hints: fastify's route reads them again and refuses the request with code 4.
      }
      if (!admitProtocol(req, res, hints !== undefined, this.o.onSkew)) return;
    }
    if (!hints) return this.next(req, res);
    if (hints.command !== 'DEL') {
      this.othersInFlight++;
      const cid = hints.containerId;
      countIn(this.othersByContainer, cid, 1);
      whenDone(req, res, () => {
        this.othersInFlight--;
        countIn(this.othersByContainer, cid, -1);
        this.lastOtherEnded = performance.now();
        this.pump();
      });
      return isRawJson(req) ? serveRawCni(req, res, hints, this.o) : this.next(req, res);
    }
    const p: Parked = { req, res, hints, admitted: false, early: false, behind: false, rearm: false };
    this.parked.push(p);
    whenDone(req, res, () => {
      if (p.admitted) {
        this.delsAdmitted--;
        if (p.early) this.earlyAdmitted--;
        else countIn(this.engineDelsByContainer, p.hints.containerId, -1);
        if (p.behind) this.behindAdmitted--;
      } else {
        const i = this.parked.indexOf(p); // the client gave up while waiting
        if (i >= 0) this.parked.splice(i, 1);
      }
      this.pump();
    });
    this.pump();
  }

  /**
   * Admits waiting DELs, each kind in arrival order. DELs for the engine (which may run a plugin for
   * seconds) and DELs answered here from a tombstone (well under a millisecond each) have caps of
   * their own: the first bounds plugin slots taken from ADDs, the second how many DELs each event
   * loop turn answers ahead of an ADD's connection (a fast DEL's slot is free again within the turn).
   * While ADDs are being served, tombstoned DELs are also paced (see the top of this file). A DEL
   * that cannot be admitted yet does not hold up the other kind, and a DEL of a container whose ADD
   * or CHECK is in flight goes to the engine at once, uncapped (the engine queues it behind that
   * request, in arrival order): a runtime giving up on a slow ADD and deleting its sandbox must not
   * hold the one engine DEL slot, and with it every other pod's DEL, for the plugin's timeout. The
   * same for a DEL of a container with a DEL already admitted for the engine (a runtime's retry, a
   * second network's DEL): it joins that DEL or waits behind it in the container's queue, so two DELs
   * of one pod whose delegate hangs do not take both slots from every other pod (a hostile review).
   */
  private pump(): void {
    const now = performance.now();
    const adding = this.othersInFlight > 0;
    const engineCap = adding ? this.o.maxDelsWhileAdding : this.o.maxDels;
    const earlyCap = adding ? 1 : Math.min(2, this.o.maxDels);
    let earlyHeld = false;
    let engineHeld = false;
    for (let i = 0; i < this.parked.length;) {
      const p = this.parked[i] as Parked;
      if (p.req.socket.destroyed) {
        this.parked.splice(i, 1); // the client gave up while waiting
        continue;
      }
      const queuedAhead = this.queuedAhead(p.hints.containerId);
      // Once both kinds are held only such a DEL can still go: the scan goes on for it (stopping here
      // left it waiting behind held DELs), skipping the others without asking about their tombstones.
      if (earlyHeld && engineHeld && !queuedAhead) {
        i++;
        continue;
      }
      const json = isRawJson(p.req);
      const early = json && this.o.isTombstoned(p.hints);
      const behind = !early && queuedAhead;
      if (early ? earlyHeld : engineHeld && !behind) {
        i++;
        continue;
      }
      if (
        !behind &&
        (early
          ? this.earlyAdmitted >= earlyCap
          : this.delsAdmitted - this.earlyAdmitted - this.behindAdmitted >= engineCap)
      ) {
        if (early) earlyHeld = true;
        else engineHeld = true;
        i++;
        continue;
      }
      if (early && this.addPriority(now)) {
        const wait = this.lastEarly + this.o.tombstonePaceMs - now;
        if (wait > 0) {
          this.pumpIn(wait);
          earlyHeld = true;
          i++;
          continue;
        }
      }
      this.parked.splice(i, 1);
      this.admitDel(p, early, behind, now);
    }
  }

  /**
   * Whether a DEL of this container goes at once, uncapped: a hinted ADD or CHECK of it is in flight,
   * or a DEL of it admitted for the engine; the engine queues the DEL behind that request (in arrival
   * order) or joins that DEL, so it takes no slot until it is done. The engine is asked too: a
   * runtime that gave up on a slow ADD closed its connection, but the engine still runs that ADD,
   * and the runtime's DELs of that sandbox would sit in DEL slots.
   */
  private queuedAhead(cid: string | undefined): boolean {
    if (cid === undefined) return false;
    return (
      this.othersByContainer.has(cid) || this.engineDelsByContainer.has(cid) || this.o.hasAddOrCheck?.(cid) === true
    );
  }

  /** Counts a waiting DEL (taken off `parked`) as admitted and serves it: raw JSON here, else fastify. */
  private admitDel(p: Parked, early: boolean, behind: boolean, now: number): void {
    p.admitted = true;
    p.early = early;
    p.behind = behind;
    this.delsAdmitted++;
    if (!early) countIn(this.engineDelsByContainer, p.hints.containerId, 1);
    if (behind) this.behindAdmitted++;
    if (early) {
      this.earlyAdmitted++;
      this.lastEarly = now;
    }
    if (p.rearm) this.bodyDeadline(p.req, p.res);
    if (isRawJson(p.req)) serveRawCni(p.req, p.res, p.hints, this.o, early ? () => this.answeredEarly++ : undefined);
    else this.next(p.req, p.res);
  }

  /** Pumps again when the pace allows the next tombstoned DEL (an answered request pumps sooner). */
  private pumpIn(ms: number): void {
    if (this.paceTimer) return;
    this.paceTimer = setTimeout(() => {
      this.paceTimer = undefined;
      this.pump();
    }, Math.ceil(ms));
  }
}
