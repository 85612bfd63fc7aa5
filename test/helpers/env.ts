// A scratch environment per test file: a temp dir, unique netns/bridge names and subnets, and a
// cleanup stack that removes every netns, link, process and dir it made, even when a test fails.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const REPO = new URL('../..', import.meta.url).pathname.replace(/\/$/, '');
export const FIXTURE_BIN = join(REPO, 'test/fixtures/bin');
export const SYSTEM_CNI_BIN = '/usr/lib/cni';

let counter = 0;

export function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function quiet(cmd: string, args: string[]): void {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
  } catch {
    /* already gone */
  }
}

export class TestEnv {
  readonly dir: string;
  readonly tag: string;
  private readonly cleanups: Array<() => void | Promise<void>> = [];

  constructor(name: string) {
    this.tag = `${(process.pid % 10000).toString(36)}${(counter++).toString(36)}`;
    this.dir = mkdtempSync(join(tmpdir(), `stw-${name}-`));
    this.defer(() => rmSync(this.dir, { recursive: true, force: true }));
  }

  /** Registers cleanup work; it runs in reverse order at close(). */
  defer(fn: () => void | Promise<void>): void {
    this.cleanups.push(fn);
  }

  /** A new network namespace; returns its path. */
  netns(): string {
    const name = `stw-${this.tag}-${(counter++).toString(36)}`;
    sh('ip', ['netns', 'add', name]);
    this.defer(() => quiet('ip', ['netns', 'del', name]));
    return `/run/netns/${name}`;
  }

  /** A bridge name (<= 15 bytes) that is deleted at close whether or not a plugin created it. */
  bridge(): string {
    const name = `stwb${this.tag}${(counter++).toString(36)}`.slice(0, 15);
    this.defer(() => quiet('ip', ['link', 'del', name]));
    return name;
  }

  /** A /24 unlikely to collide with other test files running at the same time. */
  subnet(): string {
    const n = (process.pid * 7 + counter++) % 250;
    return `10.${200 + (counter % 50)}.${n}.0/24`;
  }

  async close(): Promise<void> {
    for (const fn of this.cleanups.reverse()) {
      try {
        await fn();
      } catch {
        /* keep cleaning */
      }
    }
  }
}

/** IPs host-local holds in dataDir/network (its lease files), excluding its bookkeeping files. */
export function leases(dataDir: string, network: string): string[] {
  const dir = join(dataDir, network);
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((f) => f !== 'lock' && !f.startsWith('last_reserved_ip'));
}

export function linkExists(netnsPath: string, ifname: string): boolean {
  const name = netnsPath.split('/').pop() as string;
  try {
    execFileSync('ip', ['-n', name, 'link', 'show', ifname], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function addressesIn(netnsPath: string, ifname: string): string[] {
  const name = netnsPath.split('/').pop() as string;
  const out = sh('ip', ['-n', name, '-j', 'addr', 'show', ifname]);
  const parsed = JSON.parse(out) as Array<{ addr_info: Array<{ family: string; local: string; prefixlen: number }> }>;
  return parsed.flatMap((l) => l.addr_info.filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`));
}

/** Lines the fixture plugin recorded, optionally only one command. */
export function fixtureCalls(stateDir: string, command?: string): string[] {
  const file = join(stateDir, 'calls.log');
  if (!existsSync(file)) return [];
  const lines = sh('cat', [file])
    .split('\n')
    .filter((l) => l !== '');
  return command ? lines.filter((l) => l.startsWith(`${command} `)) : lines;
}
