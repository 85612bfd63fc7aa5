// deploy/ checked two ways: every object against the Kubernetes API schemas (kubernetes-models,
// validators generated from the upstream OpenAPI spec; nothing hand-written here, no network),
// and every path, socket and flag the manifests use against what the daemon and shim use by
// default, through the daemon's own option parser.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { DEFAULT_SOCKET, DEFAULT_SPOOL_DIR, DEFAULT_STATE_DIR } from '@cni-steward/shared';
import { parseRunConfig } from '../../daemon/src/config.js';
import { parseProbeArgs } from '../../daemon/src/probe.js';
import { parseInstallConfig } from '../../daemon/src/lifecycle/command-line.js';
import { DEFAULT_SHIM, defaultShim } from '../../daemon/src/lifecycle/shim-path.js';
import { REPO } from '../helpers/env.js';
import { requiredGo, versionAtLeast } from '../../scripts/build-shims.mjs';

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [k: string]: any;
}

const DEPLOY = join(REPO, 'deploy');
// deploy/base/ (namespace, service account, RBAC) apart from deploy/ (the DaemonSet): `kubectl delete
// -f deploy/` then removes the DaemonSet alone, and its pods' SIGTERM check still has its RBAC.
const yamlIn = (dir: string) =>
  readdirSync(join(DEPLOY, dir))
    .filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'))
    .map((f) => join(dir, f));
const files = [...yamlIn('base'), ...yamlIn('.')].sort();
const objects: Array<{ file: string; obj: K8sObject }> = files.flatMap((file) =>
  parseAllDocuments(readFileSync(join(DEPLOY, file), 'utf8')).map((d) => {
    assert.equal(d.errors.length, 0, `${file}: ${d.errors.map((e) => e.message).join('; ')}`);
    return { file, obj: d.toJS() as K8sObject };
  }),
);

/** kubernetes-models' generated validator for this apiVersion + kind; throws with the schema errors. */
async function validate(obj: K8sObject): Promise<void> {
  const mod = (await import(`kubernetes-models/${obj.apiVersion}`)) as Record<
    string,
    new (o: unknown) => { validate(): void }
  >;
  const Model = mod[obj.kind];
  assert.ok(Model, `kubernetes-models has no ${obj.apiVersion} ${obj.kind}`);
  new Model(obj).validate();
}

function only(kind: string): K8sObject {
  const found = objects.filter((o) => o.obj.kind === kind);
  assert.equal(found.length, 1, `exactly one ${kind} in deploy/`);
  return found[0]!.obj;
}

describe('deploy/ manifests against the Kubernetes API schemas', () => {
  it('has the namespace, service account, RBAC and DaemonSet', () => {
    assert.deepEqual(objects.map((o) => o.obj.kind).sort(), [
      'DaemonSet',
      'Namespace',
      'Role',
      'RoleBinding',
      'ServiceAccount',
    ]);
  });

  it('deploy/ itself holds only the DaemonSet, so `kubectl delete -f deploy/` leaves the RBAC its SIGTERM check needs', () => {
    assert.deepEqual(
      objects.filter((o) => !o.file.startsWith('base/')).map((o) => o.obj.kind),
      ['DaemonSet'],
    );
  });

  for (const { file, obj } of objects) {
    it(`${file}: ${obj.kind} ${obj.metadata?.name} is valid ${obj.apiVersion}`, async () => {
      await validate(obj);
    });
  }

  it('the validator does reject a malformed object (so the passes above mean something)', async () => {
    const ds = structuredClone(only('DaemonSet'));
    ds.spec.template.spec.containers[0].volumeMounts[0].mountPath = 42;
    ds.spec.template.spec.terminationGracePeriodSeconds = 'long';
    await assert.rejects(validate(ds), /mountPath|terminationGracePeriodSeconds/);
  });
});

describe('deploy/ paths and flags match the daemon and shim defaults', () => {
  const ds = only('DaemonSet');
  const pod = ds.spec.template.spec;
  const init = pod.initContainers.find((c: any) => c.name === 'install');
  const main = pod.containers.find((c: any) => c.name === 'stewardd');
  /**
   * A container's args as the kubelet passes them: `$(NAME)` expanded from its env, a fieldRef
   * standing for what the kubelet would put there (a node address for status.hostIP). A name the
   * env does not define stays literal, and parsing then refuses it.
   */
  const fieldValues: Record<string, string> = {
    'status.hostIP': '10.0.0.5',
    'metadata.namespace': ds.metadata?.namespace ?? '',
  };
  const argsOf = (c: any): string[] => {
    const vars: Record<string, string> = {};
    for (const e of c.env ?? [])
      vars[e.name] = (e.value as string | undefined) ?? fieldValues[e.valueFrom?.fieldRef?.fieldPath as string] ?? '';
    return (c.args as string[]).map((a) => a.replace(/\$\((\w+)\)/g, (m, n: string) => vars[n] ?? m));
  };
  const hostPathOf = (name: string) =>
    pod.volumes.find((v: any) => v.name === name)?.hostPath?.path as string | undefined;
  const mountsOf = (c: any) => c.volumeMounts as Array<{ name: string; mountPath: string; mountPropagation?: string }>;

  it('every mount shows the host path at the same path (the shim on the host and the daemon must agree)', () => {
    for (const c of [init, main]) {
      for (const m of mountsOf(c)) assert.equal(hostPathOf(m.name), m.mountPath, `${c.name}: ${m.name}`);
    }
  });

  it('the daemon mounts the socket dir, state dir, CNI dirs and /run/netns (HostToContainer)', () => {
    const paths = Object.fromEntries(mountsOf(main).map((m) => [m.mountPath, m]));
    for (const p of [
      dirname(DEFAULT_SOCKET),
      DEFAULT_STATE_DIR,
      '/opt/cni/bin',
      '/etc/cni/net.d',
      '/run/netns',
      '/var/lib/cni',
    ]) {
      assert.ok(paths[p], `missing mount ${p}`);
    }
    assert.equal(paths['/run/netns']!.mountPropagation, 'HostToContainer');
    assert.ok(DEFAULT_SPOOL_DIR.startsWith(`${DEFAULT_STATE_DIR}/`), 'the shim spools inside the mounted state dir');
  });

  it("the daemon's flags are its defaults, and the conf dir it watches is mounted", () => {
    const cfg = parseRunConfig(argsOf(main).slice(1));
    const defaults = parseRunConfig([]);
    assert.equal(main.args[0], 'run');
    assert.equal(cfg.socket, DEFAULT_SOCKET);
    assert.equal(cfg.stateDir, defaults.stateDir);
    assert.equal(cfg.spoolDir, DEFAULT_SPOOL_DIR);
    assert.deepEqual(cfg.binDirs, defaults.binDirs);
    assert.ok(mountsOf(main).some((m) => m.mountPath === cfg.cniConfDir));
    assert.equal(cfg.uninstallOnDelete, 'auto');
  });

  it('install writes what the daemon serves: same socket, spool and dirs as the defaults', () => {
    assert.equal(init.args[0], 'install');
    const cfg = parseInstallConfig(argsOf(init).slice(1));
    assert.deepEqual(cfg, parseInstallConfig([]));
    assert.equal(cfg.shimLibc, 'glibc');
    // The static shim runs on either libc: --shim-libc musl names the same file as glibc.
    assert.equal(parseInstallConfig(['--shim-libc', 'musl']).shim, cfg.shim);
    assert.throws(() => parseInstallConfig(['--shim-libc', 'uclibc']), /--shim-libc "uclibc" is not glibc or musl/);
    assert.equal(cfg.socket, parseRunConfig(argsOf(main).slice(1)).socket);
    for (const p of [cfg.cniBinDir, cfg.cniConfDir, cfg.stateDir])
      assert.ok(
        mountsOf(init).some((m) => m.mountPath === p),
        `init mounts ${p}`,
      );
  });

  it('probes ask /healthz and /readyz on the default socket', () => {
    const probe = (p: any) => {
      const [bin, sub, ...rest] = p.exec.command as string[];
      assert.equal(bin, '/app/bin/stewardd');
      assert.equal(sub, 'probe');
      return parseProbeArgs(rest);
    };
    assert.deepEqual(probe(main.startupProbe), { socket: DEFAULT_SOCKET, path: '/healthz', timeoutMs: 3000 });
    assert.deepEqual(probe(main.livenessProbe), { socket: DEFAULT_SOCKET, path: '/healthz', timeoutMs: 3000 });
    assert.deepEqual(probe(main.readinessProbe), { socket: DEFAULT_SOCKET, path: '/readyz', timeoutMs: 3000 });
  });

  it('both containers report their last log lines on failure, and the pod shares the host PID namespace', () => {
    for (const c of [init, main]) assert.equal(c.terminationMessagePolicy, 'FallbackToLogsOnError', c.name);
    assert.equal(pod.hostPID, true);
    // Liveness waits for the startup probe instead of a fixed delay.
    assert.equal(main.livenessProbe.initialDelaySeconds, undefined);
    assert.ok(main.startupProbe.periodSeconds * main.startupProbe.failureThreshold >= 60);
  });

  it('the grace period covers drain + request grace + the API check', () => {
    const cfg = parseRunConfig(argsOf(main).slice(1));
    const needed = (cfg.drainTimeoutMs + cfg.shutdownGraceMs) / 1000 + 5;
    assert.ok(pod.terminationGracePeriodSeconds >= needed, `${pod.terminationGracePeriodSeconds} < ${needed}`);
  });

  it('runs on every node and names its own DaemonSet and namespace for the SIGTERM check', () => {
    assert.ok(
      pod.tolerations.some((t: any) => t.operator === 'Exists' && t.key === undefined && t.effect === undefined),
    );
    for (const c of [init, main])
      assert.ok(c.resources?.requests?.cpu && c.resources?.requests?.memory, `${c.name} has requests`);
    const env = Object.fromEntries((main.env as any[]).map((e) => [e.name, e.valueFrom.fieldRef.fieldPath]));
    assert.equal(env.POD_NAMESPACE, 'metadata.namespace');
    const label = /^metadata\.labels\['(.+)'\]$/.exec(env.STEWARD_DAEMONSET)?.[1];
    assert.ok(label, 'STEWARD_DAEMONSET comes from a pod label');
    assert.equal(ds.spec.template.metadata.labels[label], ds.metadata.name);
    // What tells a label renamed apart from the DaemonSet (its pods are named <daemonset>-<suffix>).
    assert.equal(env.POD_NAME, 'metadata.name');
  });

  it('RBAC grants exactly get on this DaemonSet to its service account', () => {
    const role = only('Role');
    const binding = only('RoleBinding');
    assert.equal(role.metadata.namespace, ds.metadata.namespace);
    assert.deepEqual(role.rules, [
      { apiGroups: ['apps'], resources: ['daemonsets'], resourceNames: [ds.metadata.name], verbs: ['get'] },
    ]);
    assert.deepEqual(binding.roleRef, {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: role.metadata.name,
    });
    assert.deepEqual(binding.subjects, [
      { kind: 'ServiceAccount', name: pod.serviceAccountName, namespace: ds.metadata.namespace },
    ]);
    assert.equal(only('ServiceAccount').metadata.name, pod.serviceAccountName);
    assert.equal(only('Namespace').metadata.name, ds.metadata.namespace);
  });

  it('the image puts the daemon, probe wrapper and shims where the manifests and defaultShim expect', () => {
    const dockerfile = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
    assert.match(dockerfile, /^WORKDIR \/app$/m);
    assert.match(
      dockerfile,
      /^ENTRYPOINT \["\/usr\/bin\/tini", "-s", "--", "node", "\/app\/daemon\/dist\/main\.js"\]$/m,
    );
    assert.match(dockerfile, /^COPY --from=build \/src\/bin\/stewardd bin\/$/m);
    assert.match(dockerfile, /^COPY --from=shim \/src\/dist\/shims\/ dist\/shims\/$/m);
    // The shim stage: the Node image (build-shims.mjs runs under node) with the Go toolchain of GO_IMAGE,
    // pinned to a patch release that shim/go.mod allows; not Debian's golang-go (Go 1.19 in bookworm).
    assert.doesNotMatch(dockerfile, /apt-get install[^\n]*golang/);
    const goImage = /^ARG GO_IMAGE=golang:(\d+\.\d+\.\d+)-bookworm$/m.exec(dockerfile);
    assert.ok(goImage, 'ARG GO_IMAGE=golang:<x.y.z>-bookworm');
    assert.ok(versionAtLeast(goImage[1]!, requiredGo()), `${goImage[1]} >= go.mod's ${requiredGo()}`);
    assert.match(dockerfile, /^FROM \$\{GO_IMAGE\} AS go$/m);
    const shimStage = dockerfile.slice(dockerfile.indexOf('AS shim\n'), dockerfile.indexOf('AS build\n'));
    assert.match(shimStage, /^COPY --from=go \/usr\/local\/go\/ \/usr\/local\/go\/$/m);
    assert.match(shimStage, /^ENV PATH=\/usr\/local\/go\/bin:\$PATH$/m);
    // package.json's version and the commit (a build arg: no .git in the context) stamped into the shim.
    assert.match(shimStage, /^COPY package\.json \.\/$/m);
    assert.match(shimStage, /^ARG STEWARD_COMMIT=$/m);
    assert.match(shimStage, /^RUN node scripts\/build-shims\.mjs --targets host/m);
    // A tree that carries dist/shims (the image): install copies the shim for its CPU, whatever the libc.
    const dist = mkdtempSync(join(tmpdir(), 'stw-dist-'));
    try {
      mkdirSync(join(dist, 'shims'));
      for (const f of ['steward-linux-x64', 'steward-linux-arm64']) writeFileSync(join(dist, 'shims', f), '');
      assert.equal(defaultShim('glibc', 'x64', dist), join(dist, 'shims/steward-linux-x64'));
      assert.equal(defaultShim('musl', 'x64', dist), join(dist, 'shims/steward-linux-x64'));
      assert.equal(defaultShim('musl', 'arm64', dist), join(dist, 'shims/steward-linux-arm64'));
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
    // A checkout without dist/shims falls back to its own build, dist/steward.
    assert.equal(defaultShim('glibc', 'x64', '/nonexistent/dist'), '/nonexistent/dist/steward');
    assert.equal(DEFAULT_SHIM, join(REPO, 'dist/steward'));
  });
});
