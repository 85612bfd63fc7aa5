// Types of scripts/build-shims.mjs for the TypeScript that imports it (bench/, test/).

export const TARGETS: Record<string, { goos: string; goarch: string }>;
export const SHIM_SRC: string;
export const GO_BUILD_FLAGS: string[];
export const GO_MISSING: string;
export function goCommand(): string | undefined;
export function compileFor(target: string, out: string, flags?: string[], src?: string): string;
export function hostTarget(): string;
export function buildShim(
  target: string,
  outDir: string,
): { target: string; path: string; bytes: number; file: string };
