// The order in which a row runs its modes, iteration by iteration. A plain rotation keeps the
// modes' cyclic order, so each mode always runs right after the same other one: whatever a mode
// leaves behind (a netns the kernel is still tearing down, a daemon's work after its answer) is then
// charged to one neighbour only. Measured on the chain row: the daemon alone was 1.14× direct when
// it always followed the direct run and 0.97× when it followed the shim, in the same code.
// A Williams design (a balanced Latin square) puts every mode in every position equally often and
// right after every other mode equally often, so that carry-over is spread over all modes alike.

/** The Williams square's first row for n modes: 0, 1, n−1, 2, n−2, … */
function firstRow(n: number): number[] {
  const row = [0];
  for (let j = 1; j < n; j++) row.push(j % 2 === 1 ? (j + 1) / 2 : n - j / 2);
  return row;
}

/** How many iterations make one balanced cycle: n for an even number of modes, 2n for an odd one. */
export function balancedCycle(n: number): number {
  return n % 2 === 0 ? n : 2 * n;
}

/**
 * The modes in the order iteration `i` runs them (i ≥ 0; the cycle repeats). Over any
 * `balancedCycle(n)` consecutive iterations starting at a multiple of it, each mode is at each
 * position equally often and each ordered pair of modes is adjacent equally often.
 */
export function balancedOrder<T>(modes: readonly T[], i: number): T[] {
  const n = modes.length;
  if (n === 0) return [];
  const cycle = balancedCycle(n);
  const r = ((i % cycle) + cycle) % cycle;
  // Rows n..2n−1 of the odd case are the first n rows reversed.
  const row = firstRow(n).map((v) => modes[(v + (r % n)) % n] as T);
  return r < n ? row : row.reverse();
}

/** `wanted` iterations rounded up to whole balanced cycles of n modes. */
export function wholeCycles(wanted: number, n: number): number {
  const cycle = balancedCycle(n);
  return Math.ceil(wanted / cycle) * cycle;
}
