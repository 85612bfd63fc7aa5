// Summarises a V8 .cpuprofile (node --cpu-prof): self time by function and by package/file, and
// inclusive time of chosen frames, so a profile can be read in a terminal and quoted in a report.
// usage: node --import tsx bench/tools/cpuprofile-summary.ts FILE.cpuprofile [top=25]

import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: cpuprofile-summary FILE.cpuprofile [top]');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(p.nodes.map((nd) => [nd.id, nd]));
const parent = new Map<number, number>();
for (const nd of p.nodes) for (const c of nd.children ?? []) parent.set(c, nd.id);

// Self time per node from samples and their time deltas (microseconds).
const self = new Map<number, number>();
for (let i = 0; i < p.samples.length; i++) {
  const id = p.samples[i] as number;
  self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
}
const total = [...self.values()].reduce((a, b) => a + b, 0);
const idle = [...self.entries()]
  .filter(([id]) => byId.get(id)?.callFrame.functionName === '(idle)')
  .reduce((a, [, v]) => a + v, 0);
const busy = total - idle;

function where(nd: Node): string {
  const u = nd.callFrame.url;
  if (u === '') return nd.callFrame.functionName.startsWith('(') ? nd.callFrame.functionName : '(native)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(u);
  if (m) return m[1] as string;
  if (u.startsWith('node:')) return u;
  return u.replace(/^file:\/\/.*?\/(daemon|shared|shim)\//, '$1/');
}

const byPkg = new Map<string, number>();
const byFn = new Map<string, number>();
for (const [id, us] of self) {
  const nd = byId.get(id) as Node;
  if (nd.callFrame.functionName === '(idle)') continue;
  const pkg = where(nd);
  byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + us);
  const fn = `${nd.callFrame.functionName || '(anon)'} ${pkg}:${nd.callFrame.lineNumber + 1}`;
  byFn.set(fn, (byFn.get(fn) ?? 0) + us);
}

// Inclusive time of frames by function name (counted once per sample even when recursive).
const inclusive = new Map<string, number>();
for (let i = 0; i < p.samples.length; i++) {
  const seen = new Set<string>();
  let id: number | undefined = p.samples[i];
  while (id !== undefined) {
    const nd = byId.get(id) as Node;
    const key = `${nd.callFrame.functionName || '(anon)'} ${where(nd)}`;
    if (!seen.has(key)) {
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + (p.timeDeltas[i] ?? 0));
    }
    id = parent.get(id);
  }
}

const ms = (us: number) => (us / 1000).toFixed(0).padStart(7);
const pct = (us: number) => ((100 * us) / busy).toFixed(1).padStart(5);
console.log(
  `profile ${((p.endTime - p.startTime) / 1e6).toFixed(1)} s, busy ${(busy / 1e6).toFixed(2)} s, idle ${(idle / 1e6).toFixed(2)} s`,
);
console.log('\nself time by package/file (ms, % of busy):');
for (const [k, v] of [...byPkg].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${ms(v)} ${pct(v)}%  ${k}`);
console.log('\nself time by function:');
for (const [k, v] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${ms(v)} ${pct(v)}%  ${k}`);
console.log('\ninclusive time (top frames):');
for (const [k, v] of [...inclusive]
  .filter(([k]) => !k.startsWith('(root)'))
  .sort((a, b) => b[1] - a[1])
  .slice(0, top * 2))
  console.log(`${ms(v)} ${pct(v)}%  ${k}`);
