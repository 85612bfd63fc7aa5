// The shim's contract vectors (shared/vectors/shim.json) from stewardd's side of the socket, in-process
// and without root: stewardd's own HTTP server (server.ts buildApp: the admission path, the protocol
// check, the raw-body route, serveCni and a real engine on an in-memory journal with fake plugins)
// listening on a Unix socket in a temp dir, and its own spool ingest.
//
//  - Every refusal of the shim (exit 1, nothing sent, a code) is rebuilt as the request the shim would
//    have sent (the vector's CNI_* variables and its stdin as the netconf, the hint headers) and must be
//    refused by stewardd with the same code, unless SHIM_ONLY lists it: refusals that are the shim's
//    alone by design, each with the reason and what stewardd does instead (asserted, so the list
//    cannot go stale).
//  - Every request a vector says the shim sends must be decoded by stewardd (shared/src/wire.ts), its
//    hint headers agreeing with its body by stewardd's own check (routes/hints.ts) and with shared
//    hintHeaders, and served (200), unless NETCONF_REFUSED lists it: a vector whose netconf is chosen for
//    what the shim does with it, which stewardd then refuses for its content (the shim leaves delegates
//    and names to stewardd by design).
//  - Every DEL a vector says the shim spools must be ingested by stewardd's spool drain (engine/spool.ts).
//
// The netns is the node's to judge (engine/netns.ts statfs's it): the vectors name
// /var/run/netns/cni-1, which does not exist here, so the engine is handed /proc/self/ns/net instead,
// after the request was decoded and its hints checked.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  CNI_ENV_VARS,
  CNI_ROUTE,
  decodeWireRequest,
  hintHeaders,
  spoolRequest,
  type CniRequestBody,
} from '@cni-steward/shared';
import { ingestSpool } from '../../daemon/src/engine/spool.js';
import { checkHints, readHints } from '../../daemon/src/routes/hints.js';
import type { AppDeps } from '../../daemon/src/routes/deps.js';
import { buildApp } from '../../daemon/src/server.js';
import { NETNS, setup, silentLog } from '../helpers/engine-fakes.js';
import { postUnix } from '../helpers/unix-post.js';
import {
  gen,
  loadVectors,
  sentList,
  stdinOf,
  wantedCode,
  type SentRequest,
  type Vector,
} from '../helpers/shim-vectors.js';

const file = loadVectors();
const dir = mkdtempSync(join(tmpdir(), 'steward-vectors-daemon-'));
const socket = join(dir, 'stewardd.sock');
const paths: Record<string, string> = { '@SOCKET@': join(dir, 'shim.sock'), '@SPOOL@': join(dir, 'spool') };
const subst = (s: string) => s.replace(/@(SOCKET|SPOOL)@/g, (m) => paths[m] as string);
const VECTOR_NETNS = '/var/run/netns/cni-1';

/**
 * What stewardd does with a request the shim refuses: a code (0: served), or null when no request can
 * be built (stewardd never sees stdin; the shim had nothing to forward).
 */
interface ShimOnly {
  reason: string;
  daemon: number | null;
}

const TIMEOUTS =
  '"timeouts" are the shim\'s own bounds (it waits, stewardd does not): stewardd\'s schema takes any object and reads only timeouts.add and timeouts.del, for its answer budgets, and takes an unusable one for the default (engine/answer-budget.ts)';
const SOCKET = '"socket" is where the shim connects: stewardd\'s schema wants a non-empty string and never opens it';
const STDIN = 'stewardd never sees stdin: the shim decodes it, and with it nothing could be forwarded';

/** Refusals that are the shim's alone by design, by vector name. */
const SHIM_ONLY: Record<string, ShimOnly> = {
  'malformed JSON on stdin is code 6': { reason: STDIN, daemon: null },
  'empty stdin on ADD is code 6': { reason: STDIN, daemon: null },
  'the environment is judged before stdin': {
    reason: `${STDIN} (the shim reads the environment first: 4)`,
    daemon: null,
  },
  'stdin never closed: code 6 once the STATUS bound has passed': { reason: `${STDIN}: it never ended`, daemon: null },
  'a JSON array on stdin is code 6': {
    reason:
      "stdin that is JSON but not an object is the shim's to refuse, as a decoding failure (6); stewardd would find no netconf object in the request's config (7)",
    daemon: 7,
  },
  'JSON null on stdin is code 6': {
    reason:
      "stdin that is JSON but not an object is the shim's to refuse, as a decoding failure (6); stewardd would find no netconf object in the request's config (7)",
    daemon: 7,
  },
  'stdin of one byte over 1 MiB is code 7 even when it is valid JSON': {
    reason:
      'the shim bounds stdin (MAX_NETCONF_BYTES, before it compacts it); stewardd bounds the request (MAX_REQUEST_BYTES), which the compacted netconf fits',
    daemon: 0,
  },
  'a socket relative is code 7 on ADD, nothing sent': { reason: SOCKET, daemon: 0 },
  'a socket 108 bytes is code 7 on ADD, nothing sent': {
    reason: `${SOCKET} (sun_path's 107 bytes bind the shim)`,
    daemon: 0,
  },
  'a socket with a NUL is code 7 on ADD, nothing sent': { reason: SOCKET, daemon: 0 },
  'timeouts with an unknown key are code 7 on ADD': { reason: TIMEOUTS, daemon: 0 },
  'timeouts of 0 ms are code 7 on ADD': { reason: TIMEOUTS, daemon: 0 },
  'timeouts of -1 are code 7 on ADD': { reason: TIMEOUTS, daemon: 0 },
  'timeouts with a string are code 7 on ADD': { reason: TIMEOUTS, daemon: 0 },
  'timeouts with a fraction are code 7 on ADD': { reason: TIMEOUTS, daemon: 0 },
  'timeouts over an hour are code 7 on ADD': { reason: TIMEOUTS, daemon: 0 },
  'timeouts naming status are code 7 on ADD': { reason: TIMEOUTS, daemon: 0 },
  "an ADD bound over 200 s is code 7: an ADD and the undo of a skewed one must fit the kubelet's 4 minutes": {
    reason: TIMEOUTS,
    daemon: 0,
  },
  "a DEL bound over 50 s is code 7 on ADD: a DEL stewardd does not answer is spooled inside CRI-O's minute": {
    reason: TIMEOUTS,
    daemon: 0,
  },
  'STATUS refuses bad timeouts (7): it must not report ready for a netconf no ADD accepts': {
    reason: TIMEOUTS,
    daemon: 0,
  },
  'spoolDir with a NUL is code 7 on ADD, nothing sent': {
    reason:
      '"spoolDir" is where the shim writes (the kernel would cut the path at the NUL); stewardd drains its own --spool-dir and its schema only asks for an absolute path',
    daemon: 0,
  },
};

/** Requests the shim sends (by vector name) whose netconf stewardd refuses for its content, by design. */
const NETCONF_REFUSED: Record<string, { reason: string; code: number; msg: RegExp }> = {
  "the netconf's keys are read as JSON reads them: an escaped key is the key, the last of a repeated one wins": {
    reason: 'the netconf has only the keys the shim reads (no delegates): stewardd refuses it as a steward netconf',
    code: 7,
    msg: /must have required property 'delegates'/,
  },
  'a network name with a lone UTF-16 surrogate is sent without that hint': {
    reason:
      'the name is chosen for the hint the shim leaves out; stewardd refuses it as a network name (and the empty delegates)',
    code: 7,
    msg: /invalid steward netconf/,
  },
  'only the CNI_* variables and the netconf are sent, with the hint headers and the protocol': {
    reason: 'the name ("my net/1") is chosen for its percent-encoded hint; stewardd refuses it as a network name',
    code: 7,
    msg: /^network name "my net\/1" must start with an alphanumeric character/,
  },
};

// One engine per vector (a fresh in-memory journal); the server's deps hand requests to the current one.
let current = setup();
const withNodeNetns = (req: CniRequestBody): CniRequestBody =>
  req.env.netns === VECTOR_NETNS ? { ...req, env: { ...req.env, netns: NETNS } } : req;
const deps: AppDeps = {
  engine: {
    handle: (req, clientGone) => current.engine.handle(withNodeNetns(req), clientGone),
    isTombstoned: (key) => current.engine.isTombstoned(key),
    hasAddOrCheck: (containerId) => current.engine.hasAddOrCheck(containerId),
    rearmAbandoned: () => current.engine.rearmAbandoned(),
  },
  journal: current.store,
  executions: () => ({ slots: 4, inUse: 0, queued: 0 }),
  warnings: () => [],
  metrics: current.metrics,
  scheduler: undefined as unknown as AppDeps['scheduler'],
  log: silentLog,
  isReady: () => true,
  isServing: () => true,
  version: 'test',
  startedAt: Date.now(),
  health: async () => [],
};
const app = buildApp(deps);

before(async () => {
  await app.listen({ path: socket });
});
after(async () => {
  await app.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A request as the shim sends it: the body's text and its headers. */
interface Request {
  body: string;
  headers: Record<string, string>;
}

/**
 * The request the shim builds from a vector's env and stdin (shim/netconf.go requestBody, hintHeaders):
 * the CNI_* variables it was given and the netconf, compacted; undefined when stdin is no JSON to forward.
 */
function rebuild(v: Vector): Request | undefined {
  const env: Record<string, string> = {};
  for (const name of CNI_ENV_VARS) {
    const g = v.env[name];
    // Bytes that are not UTF-8 become U+FFFD, as Go's JSON encoder writes them.
    if (g !== undefined) env[name] = subst(gen(g).toString('utf8'));
  }
  const { data, open } = stdinOf(file, v.stdin, subst);
  if (open) return undefined;
  const text = data.toString('utf8');
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch {
    return undefined;
  }
  let compact: string;
  try {
    compact = JSON.stringify(config);
  } catch {
    compact = text; // nested deeper than JSON.stringify recurses: forwarded as it came
  }
  const conf = (typeof config === 'object' && config !== null ? config : {}) as Record<string, unknown>;
  return { body: `{"env":${JSON.stringify(env)},"config":${compact}}`, headers: hintHeaders(env, conf) };
}

/** A request a vector pins (want.sent, or one of them): its body, and the hints as the vector gives them. */
function pinned(v: Vector, s: SentRequest): Request {
  const want = JSON.parse(subst(JSON.stringify(s))) as SentRequest;
  const body = want.body === undefined ? rebuild(v)?.body : JSON.stringify(want.body);
  assert.ok(body !== undefined, 'the request has no body to send');
  const b = JSON.parse(body) as { env: Record<string, string>; config: Record<string, unknown> };
  const headers = hintHeaders(b.env, b.config);
  // The vector's headers are the shim's: shared hintHeaders must compute the same ones.
  for (const [k, value] of Object.entries(want.headers ?? {})) {
    if (!k.startsWith('x-cni-') && k !== 'x-steward-protocol') continue;
    assert.equal(headers[k], value ?? undefined, `hintHeaders and the shim disagree on ${k}`);
  }
  return { body, headers };
}

/** stewardd's answer to a request: 0 when served (200), else the code of its CNI error. */
async function answer(r: Request): Promise<{ code: number; msg: string }> {
  const reply = await postUnix(socket, CNI_ROUTE, r.body, 10_000, r.headers);
  if (reply.status === 200) return { code: 0, msg: '' };
  const e = JSON.parse(reply.body) as { code?: unknown; msg?: unknown };
  assert.equal(typeof e.code, 'number', `HTTP ${reply.status} without a CNI error: ${reply.body.slice(0, 200)}`);
  return { code: e.code as number, msg: String(e.msg) };
}

const shimRefuses = (v: Vector) => v.want.exitCode === 1 && v.want.sent === false && wantedCode(v) !== undefined;
const sentRequests = (v: Vector) => sentList(v.want.sent);
const spooled = (v: Vector) => (typeof v.want.spooled === 'object' ? v.want.spooled : undefined);

describe("the shim's refusals, by stewardd", () => {
  for (const v of file.vectors.filter(shimRefuses)) {
    const own = SHIM_ONLY[v.name];
    test(own ? `${v.name} (the shim's alone: ${own.reason})` : v.name, async () => {
      current = setup();
      const shim = wantedCode(v) as number;
      const r = rebuild(v);
      if (own) {
        if (own.daemon === null) return assert.equal(r, undefined, 'a request can be built: list what stewardd does');
        assert.ok(r, 'no request can be built: daemon: null');
        const { code, msg } = await answer(r);
        assert.equal(code, own.daemon, `stewardd answers ${code} (${msg}), SHIM_ONLY says ${own.daemon}`);
        assert.notEqual(
          code,
          shim,
          'stewardd refuses it with the same code: not the shim alone, take it off SHIM_ONLY',
        );
        return;
      }
      assert.ok(r, `no request can be built from this vector (its stdin): list it in SHIM_ONLY with the reason`);
      const { code, msg } = await answer(r);
      assert.equal(code, shim, `the shim refuses with ${shim}, stewardd answers ${code}: ${msg}`);
      // The environment's problems are joined into one message by the same rules on both sides
      // (shim/env.go, shared/src/cni/env.ts): the same problems, in the same order.
      if (typeof v.want.msg === 'string' && v.want.msg.startsWith('^invalid CNI environment: '))
        assert.match(msg, new RegExp(v.want.msg), 'stewardd words or orders the problems otherwise');
    });
  }

  test('every name in SHIM_ONLY is a refusal of the shim in the vectors', () => {
    const refusals = new Set(file.vectors.filter(shimRefuses).map((v) => v.name));
    assert.deepEqual(
      Object.keys(SHIM_ONLY).filter((n) => !refusals.has(n)),
      [],
    );
  });
});

describe('what the shim sends, served by stewardd', () => {
  for (const v of file.vectors) {
    const listed = sentRequests(v);
    if (!listed && v.want.sent !== true) continue;
    const refused = NETCONF_REFUSED[v.name];
    test(refused ? `${v.name} (its netconf refused by stewardd: ${refused.reason})` : v.name, async () => {
      current = setup();
      const requests = listed ? listed.map((s) => pinned(v, s)) : [rebuild(v)];
      for (const [i, r] of requests.entries()) {
        assert.ok(r, 'no request can be built from this vector');
        // Decoded, and the hints agree with the body by stewardd's own check (what the route does first).
        const hints = readHints(r.headers);
        assert.ok(hints, 'the request carries no hints');
        checkHints(hints, decodeWireRequest(JSON.parse(r.body)));
        const { code, msg } = await answer(r);
        if (refused) {
          assert.equal(code, refused.code, `request ${i}: stewardd answers ${code}: ${msg}`);
          assert.match(msg, refused.msg);
        } else assert.equal(code, 0, `request ${i}: stewardd answers ${code}: ${msg}`);
      }
    });
  }
});

test('every name in NETCONF_REFUSED is a request the shim sends in the vectors', () => {
  const sends = new Set(file.vectors.filter((v) => sentRequests(v) || v.want.sent === true).map((v) => v.name));
  assert.deepEqual(
    Object.keys(NETCONF_REFUSED).filter((n) => !sends.has(n)),
    [],
  );
});

describe('what the shim spools, ingested by stewardd', () => {
  for (const v of file.vectors) {
    const s = spooled(v);
    if (!s) continue;
    test(v.name, async () => {
      current = setup();
      const body = s.body !== undefined ? JSON.stringify(JSON.parse(subst(JSON.stringify(s.body)))) : rebuild(v)?.body;
      assert.ok(body, 'no request can be built from this vector');
      const spoolDir = mkdtempSync(join(dir, 'spool-'));
      spoolRequest(spoolDir, s.containerId, body);
      const report = await ingestSpool(current.engine, spoolDir, silentLog);
      assert.deepEqual(report, { ingested: 1, rejected: 0 });
      assert.deepEqual(readdirSync(spoolDir), [], 'the file is gone once its DEL is done');
      assert.ok(!existsSync(join(spoolDir, 'rejected')));
    });
  }
});
