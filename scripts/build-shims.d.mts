// Types of scripts/build-shims.mjs for the TypeScript that imports it (bench/).

export const TARGETS: Record<string, { pkg: string; bunTarget: string }>;
export const COMPILE_FLAGS: string[];
export function compileFor(target: string, entry: string, out: string, flags?: string[]): string;
export function buildShim(
  target: string,
  outDir: string,
): { target: string; path: string; bytes: number; file: string };
