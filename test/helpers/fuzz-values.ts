// The generic half of the fuzz inputs (test/integration/fuzz.test.ts): a seeded PRNG, and hostile
// strings, JSON values and keys drawn from it. fuzz.ts builds CNI netconfs, stdin and environments
// from these.

// ---- seeded PRNG (mulberry32)

export function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)] as T;
  const chance = (p: number) => next() < p;
  return { next, int, pick, chance };
}
export type Rng = ReturnType<typeof prng>;

const UNICODE = ['é', 'コンテナ', '🚀', '\u202e', '\u200b', 'Ω', '\ufeff', 'ß'];
const CONTROL = ['\x01', '\x1b[31m', '\n', '\r', '\t', '\x7f'];

export function hostileString(r: Rng): string {
  switch (r.int(9)) {
    case 0:
      return '';
    case 1:
      return 'x'.repeat(r.pick([16, 64, 256, 4096, 100_000]));
    case 2:
      return `a${r.pick(CONTROL)}b`;
    case 3:
      return r.pick(UNICODE).repeat(r.int(20) + 1);
    case 4:
      return r.pick(['../../etc/passwd', '/', '.', '..', 'a/b', 'a b', '-rf', '$(id)', '`id`', '%s%n', 'null']);
    case 5:
      return String(r.int(1e9));
    case 6:
      return r.pick(['=', ';', '=;=;', 'K=V;K=V', 'a=b=c', ';;;', 'IgnoreUnknown=1;']);
    case 7:
      return Array.from({ length: r.int(30) + 1 }, () => String.fromCharCode(32 + r.int(95))).join('');
    default:
      return `${r.pick(UNICODE)}${r.pick(CONTROL)}${'y'.repeat(r.int(300))}`;
  }
}

export function randomValue(r: Rng, depth = 0): unknown {
  switch (r.int(depth > 3 ? 6 : 9)) {
    case 0:
      return null;
    case 1:
      return r.chance(0.5);
    case 2:
      return r.pick([0, -1, 1.5, 1e308, -0, 2 ** 53 + 1, 65536]);
    case 3:
      return hostileString(r);
    case 4:
      return r.pick(['0.3.1', '1.0.0', '1.1.0', '9.9.9', '', 'v1', '1.0']);
    case 5:
      return 'steward';
    case 6:
      return Array.from({ length: r.int(4) }, () => randomValue(r, depth + 1));
    case 7: {
      const o: Record<string, unknown> = {};
      for (let i = r.int(4); i > 0; i--) o[randomKey(r)] = randomValue(r, depth + 1);
      return o;
    }
    default:
      return JSON.parse(
        `{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}},"fz":${JSON.stringify(hostileString(r))}}`,
      );
  }
}

export function randomKey(r: Rng): string {
  return r.pick([
    'fz',
    'fzKey',
    `fz${r.pick(UNICODE)}`,
    '__proto__',
    'constructor',
    'prototype',
    'name',
    'cniVersion',
    'type',
    'plugins',
    'delegates',
    'prevResult',
    'runtimeConfig',
    'capabilities',
    'args',
    'ifname',
    '',
  ]);
}
