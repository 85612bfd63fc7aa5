// Reading the shim's contract vectors (shared/vectors/shim.json, format in shared/vectors/README.md)
// for the TypeScript harnesses: the built binary's (test/integration/shim-vectors.test.ts) and
// stewardd's own decoding (test/unit/shim-vectors-daemon.test.ts). shim/vectors_test.go reads the
// same file for go test.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from './env.js';

/** A vector string: as is, {$repeat, times, prefix} or {$hex} (bytes that need not be UTF-8). */
export type Gen = string | { $repeat?: string; times?: number; prefix?: string; $hex?: string };

export interface HttpReply {
  status?: number;
  body?: string;
  protocol?: string;
  raw?: string;
}
/** One reply: an HTTP answer, raw bytes, or a stewardd that reads the request and never answers. */
export type OneReply = 'frozen' | HttpReply;

export interface SentRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string | null>;
  body?: unknown;
}

export interface Vector {
  name: string;
  env: Record<string, Gen>;
  stdin?: unknown;
  /** One reply, or one per request in order (the last repeats); unreachable and none only alone. */
  reply?: 'unreachable' | 'none' | OneReply | OneReply[];
  spool?: 'fails';
  elapsedMs?: number;
  goOnly?: string;
  want: {
    exitCode: number;
    stdout?: string;
    code?: number;
    cniVersion?: string;
    msg?: string;
    msgNot?: string;
    sent?: boolean | SentRequest | SentRequest[];
    spooled?: boolean | { containerId: string; body?: unknown };
    maxMs?: number;
  };
}

export interface VectorFile {
  netconf: Record<string, unknown>;
  vectors: Vector[];
}

export function loadVectors(): VectorFile {
  return JSON.parse(readFileSync(join(REPO, 'shared/vectors/shim.json'), 'utf8')) as VectorFile;
}

/** The spool file name pattern (shared/vectors/spool.json). */
export function spoolNamePattern(): RegExp {
  const d = JSON.parse(readFileSync(join(REPO, 'shared/vectors/spool.json'), 'utf8')) as { namePattern: string };
  return new RegExp(d.namePattern);
}

/** A vector string as bytes. */
export function gen(g: Gen): Buffer {
  if (typeof g === 'string') return Buffer.from(g, 'utf8');
  if (g.$hex !== undefined) return Buffer.from(g.$hex, 'hex');
  return Buffer.from((g.prefix ?? '') + (g.$repeat ?? '').repeat(g.times ?? 0), 'utf8');
}

const isGen = (v: unknown) => typeof v === 'object' && v !== null && ('$repeat' in v || '$hex' in v);

/** A vector's stdin as bytes, and whether it is left open (never closed). */
export function stdinOf(
  file: VectorFile,
  spec: unknown,
  subst: (s: string) => string,
): { data: Buffer; open: boolean } {
  if (spec === undefined) return { data: Buffer.alloc(0), open: false };
  if (typeof spec === 'string') return { data: Buffer.from(subst(spec), 'utf8'), open: false };
  const o = spec as Record<string, unknown>;
  if ('$netconf' in o) {
    const conf: Record<string, unknown> = { ...file.netconf };
    for (const [k, v] of Object.entries(o)) {
      if (k !== '$netconf') conf[k] = isGen(v) ? gen(v as Gen).toString('utf8') : v;
    }
    return { data: Buffer.from(subst(JSON.stringify(conf)), 'utf8'), open: false };
  }
  if ('$parts' in o) {
    const parts = (o.$parts as unknown[]).map((p) =>
      typeof p === 'object' && p !== null && '$netconf' in p
        ? stdinOf(file, p, subst).data
        : Buffer.from(subst(gen(p as Gen).toString('latin1')), 'latin1'),
    );
    let data = Buffer.concat(parts);
    if (typeof o.$pad === 'number' && data.length < o.$pad)
      data = Buffer.concat([data, Buffer.alloc(o.$pad - data.length, 0x20)]);
    return { data, open: o.$open === true };
  }
  return { data: Buffer.from(subst(JSON.stringify(spec)), 'utf8'), open: false };
}

/** A vector's replies, the i-th for the i-th connection (the last repeats); a single reply is a list of one. */
export function replyList(reply: Vector['reply']): Array<'none' | OneReply> {
  if (!Array.isArray(reply)) return [reply === undefined ? 'none' : (reply as 'none' | OneReply)];
  assert.ok(reply.length > 0, 'an empty reply list');
  for (const r of reply)
    assert.ok(
      r === 'frozen' || (typeof r === 'object' && r !== null),
      `reply ${JSON.stringify(r)} is only valid as a single reply, not in a list`,
    );
  return reply;
}

/** The requests `want.sent` describes (an object is a list of one); undefined for true, false or absent. */
export function sentList(sent: Vector['want']['sent']): SentRequest[] | undefined {
  if (typeof sent !== 'object') return undefined;
  return Array.isArray(sent) ? sent : [sent];
}

/** The CNI error code a vector expects on stdout: want.code, or the code of an exact want.stdout. */
export function wantedCode(v: Vector): number | undefined {
  if (v.want.code !== undefined) return v.want.code;
  if (v.want.stdout === undefined || v.want.stdout === '') return undefined;
  try {
    const code = (JSON.parse(v.want.stdout) as { code?: unknown }).code;
    return typeof code === 'number' ? code : undefined;
  } catch {
    return undefined;
  }
}
