import { Scratch } from './lib/scratch.js';
import { BenchDaemon } from './lib/daemon.js';
import { addDelLoad } from './rows/throughput.js';
const env = new Scratch('prof');
const d = new BenchDaemon(env, 'p', [], undefined, { NODE_OPTIONS: '--cpu-prof --cpu-prof-dir=/tmp/prof' });
try {
  await d.start();
  await addDelLoad(d, 'warm', 1, { pairs: 300 });
  const r = await addDelLoad(d, 'prof', 1, { pairs: 3000 });
  console.log(JSON.stringify({ ...r, pairMs: undefined, medianPair: r.pairMs.sort((a, b) => a - b)[r.pairMs.length >> 1] }));
  await d.stop();
} finally {
  await env.close();
}
