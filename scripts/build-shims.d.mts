// Types of scripts/build-shims.mjs for the TypeScript that imports it (bench/, test/).

export const TARGETS: Record<string, { goos: string; goarch: string }>;
export const SHIM_SRC: string;
export function requiredGo(goMod?: string): string;
export function parseGoVersion(out: string): string | undefined;
export function versionAtLeast(have: string, need: string): boolean;
export const GO_FALLBACK_DIR: string;
export type FoundGo =
  | { ok: true; go: string; version: string; required: string }
  | { ok: false; reason: 'missing' | 'old'; go?: string; version?: string; required: string; message: string };
export function findGo(opts?: { path?: string; fallback?: string; goMod?: string }): FoundGo;
export function goCommand(): string | undefined;
export function shimVersion(): string;
export const GO_BUILD_FLAGS: string[];
export class GoError extends Error {
  reason: 'missing' | 'old';
}
export function compileFor(target: string, out: string, flags?: string[], src?: string): string;
export function hostTarget(): string;
export function buildShim(
  target: string,
  outDir: string,
): { target: string; path: string; bytes: number; file: string };
