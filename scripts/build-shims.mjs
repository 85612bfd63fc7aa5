// Builds the shim, `steward` (shim/, Go's standard library only), with the machine's Go: at least the
// version shim/go.mod's `go` line names (the one place it is written), found as scripts/go-env.sh finds
// it: the `go` on PATH when it is new enough, else $STEWARD_GO_FALLBACK/go (default /usr/local/go/bin/go)
// when that one is. CGO_ENABLED=0, -trimpath, -buildvcs=false, -ldflags "-s -w -X main.version=<v>", so
// each is one static, stripped binary that runs on any Linux of its CPU, glibc or musl, and says which
// build it is (<v>: package.json's version, plus `+<short commit>` when the commit is known: git, or
// $STEWARD_COMMIT where there is no checkout, as in the image build). No module or toolchain is
// fetched (GOPROXY=off, GOTOOLCHAIN=local: shim/go.mod requires nothing).
//
//   node scripts/build-shims.mjs --local       dist/steward, for this machine's CPU (npm run build).
//                                             Without Go it prints one line saying so and exits 0:
//                                             the daemon does not need the shim to serve. A Go older
//                                             than go.mod's fails it, in one line.
//   node scripts/build-shims.mjs [--targets a,b,…|host] [--out DIR]
//                                             dist/shims/steward-linux-<x64|arm64> (npm run build:shims),
//                                             one JSON line per binary: target, path, bytes, `file`'s
//                                             description. Go is required.
import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants, mkdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { delimiter, dirname, isAbsolute, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

/** Node's CPU names (dist/shims/steward-linux-<arch>, as stewardd install looks for them) to Go's. */
export const TARGETS = {
  'linux-x64': { goos: 'linux', goarch: 'amd64' },
  'linux-arm64': { goos: 'linux', goarch: 'arm64' },
};
const DEFAULT_TARGETS = Object.keys(TARGETS);

const root = resolve(dirname(new URL(import.meta.url).pathname), '..');
export const SHIM_SRC = join(root, 'shim');

/** The oldest Go the shim builds with: the `go` line of `goMod` (shim/go.mod), e.g. "1.26". */
export function requiredGo(goMod = join(SHIM_SRC, 'go.mod')) {
  const m = /^go\s+(\d+(?:\.\d+)*)\s*$/m.exec(readFileSync(goMod, 'utf8'));
  if (!m) throw new Error(`${goMod} has no 'go' line naming the oldest Go it builds with`);
  return m[1];
}

/** `go version`'s output to the version: "go version go1.26.8 linux/amd64" -> "1.26.8" (go1.27rc1 -> "1.27"). */
export function parseGoVersion(out) {
  return /go(\d+(?:\.\d+)*)/.exec(out)?.[1];
}

/** True when dotted version `have` >= `need`, numerically (1.26 = 1.26.0). */
export function versionAtLeast(have, need) {
  const a = have.split('.').map(Number);
  const b = need.split('.').map(Number);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    if (x !== y) return x > y;
  }
  return true;
}

/** Where Go is looked for when the `go` on PATH is missing or older than go.mod's (scripts/go-env.sh). */
export const GO_FALLBACK_DIR = process.env.STEWARD_GO_FALLBACK || '/usr/local/go/bin';

function isExecutable(f) {
  try {
    accessSync(f, constants.X_OK);
    return statSync(f).isFile();
  } catch {
    return false;
  }
}

/** The executable `name` first on `path` (as `command -v`), or undefined. */
function onPath(name, path) {
  for (const dir of (path ?? '').split(delimiter)) {
    if (dir && isAbsolute(dir) && isExecutable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** The version of the go binary at `go`, or undefined when it does not run. */
function versionOf(go) {
  const r = spawnSync(go, ['version'], { encoding: 'utf8', env: { ...process.env, GOTOOLCHAIN: 'local' } });
  return r.status === 0 ? parseGoVersion(r.stdout) : undefined;
}

/**
 * The Go that builds the shim, by scripts/go-env.sh's rule: the `go` on `path` if it is at least
 * go.mod's version, else `fallback`/go if that one is. `{ ok: true, go, version, required }`, or
 * `{ ok: false, reason: 'missing' | 'old', go?, version?, required, message }` with the one line that
 * says what to do.
 */
export function findGo({ path = process.env.PATH, fallback = GO_FALLBACK_DIR, goMod } = {}) {
  const required = requiredGo(goMod);
  const found = [onPath('go', path), join(fallback, 'go')]
    .filter((go) => go !== undefined && isExecutable(go))
    .map((go) => ({ go, version: versionOf(go) }));
  const ok = found.find((g) => g.version && versionAtLeast(g.version, required));
  if (ok) return { ok: true, ...ok, required };
  const install = `install Go ${required}+ (https://go.dev/dl/; ${join(fallback, 'go')} is used when the go on PATH is missing or older)`;
  if (found.length === 0)
    return {
      ok: false,
      reason: 'missing',
      required,
      message: `Go is missing (no go on PATH, none in ${fallback}); ${install}`,
    };
  const old = found[0];
  return {
    ok: false,
    reason: 'old',
    ...old,
    required,
    message: `Go ${old.version ?? 'of unknown version'} at ${old.go} is older than the go ${required} shim/go.mod requires; ${install}`,
  };
}

/** The path of the go binary that builds the shim, or undefined when there is none new enough. */
export function goCommand() {
  const g = findGo();
  return g.ok ? g.go : undefined;
}

/** The version stamped into the shim: package.json's, plus `+<short commit>` when known. */
export function shimVersion() {
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  let commit = process.env.STEWARD_COMMIT?.trim();
  if (!commit) {
    try {
      commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }).trim();
    } catch {
      /* not a git checkout, or no git */
    }
  }
  return commit && /^[0-9a-f]{4,40}$/.test(commit) ? `${version}+${commit}` : version;
}

/**
 * The flags of every shipped shim: no build paths and no VCS stamp in it (the same source, version and
 * Go give the same bytes, in a checkout or in the image build), no symbol table or DWARF, and its
 * version in `main.version` (`steward --version`; the linker ignores -X for a program without it, as
 * the bench's floor programs).
 */
export const GO_BUILD_FLAGS = ['-trimpath', '-buildvcs=false', '-ldflags', `-s -w -X main.version=${shimVersion()}`];

/** No Go new enough to build with: its message is findGo's one line. */
export class GoError extends Error {
  constructor(found) {
    super(found.message);
    this.name = 'GoError';
    this.reason = found.reason;
  }
}

/**
 * Builds the shim (or another Go main package: `src`, as the bench's floor programs) for `target`
 * into `out` with `flags` (default GO_BUILD_FLAGS); written to a temp name and renamed, so `out` is
 * never half-written.
 */
export function compileFor(target, out, flags = GO_BUILD_FLAGS, src = SHIM_SRC) {
  const t = TARGETS[target];
  if (!t) throw new Error(`unknown target ${target}; known: ${Object.keys(TARGETS).join(', ')}`);
  const g = findGo();
  if (!g.ok) throw new GoError(g);
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.tmp`;
  rmSync(tmp, { force: true });
  execFileSync(g.go, ['build', ...flags, '-o', tmp, '.'], {
    cwd: src,
    env: {
      ...process.env,
      // The go found first on PATH, for anything it runs by name.
      PATH: `${dirname(g.go)}${delimiter}${process.env.PATH ?? ''}`,
      CGO_ENABLED: '0',
      GOOS: t.goos,
      GOARCH: t.goarch,
      GOPROXY: 'off',
      GOTOOLCHAIN: 'local',
      GOFLAGS: '',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  renameSync(tmp, out);
  return out;
}

/** This machine's target. */
export function hostTarget() {
  return `linux-${process.arch === 'arm64' ? 'arm64' : 'x64'}`;
}

export function buildShim(target, outDir) {
  const out = compileFor(target, join(outDir, `steward-${target}`));
  let file = '';
  try {
    file = execFileSync('file', ['-b', out], { encoding: 'utf8' }).trim();
  } catch {
    /* no file(1) */
  }
  return { target, path: out, bytes: statSync(out).size, file };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { targets: { type: 'string' }, out: { type: 'string' }, local: { type: 'boolean' } },
  });
  try {
    if (values.local) {
      const g = findGo();
      // Without Go the daemon still builds and serves: one line, exit 0. An older Go fails the build.
      if (!g.ok && g.reason === 'missing') {
        console.log(`build: the shim (dist/steward) is not built: ${g.message}`);
        process.exit(0);
      }
      compileFor(hostTarget(), join(root, 'dist', 'steward'));
    } else {
      const targets =
        values.targets === 'host' ? [hostTarget()] : values.targets ? values.targets.split(',') : DEFAULT_TARGETS;
      const outDir = resolve(values.out ?? join(root, 'dist', 'shims'));
      for (const target of targets) console.log(JSON.stringify(buildShim(target, outDir)));
    }
  } catch (err) {
    if (!(err instanceof GoError)) throw err;
    console.error(`build: ${err.message}`);
    process.exit(1);
  }
}
