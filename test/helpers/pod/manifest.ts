// deploy/daemonset.yaml's pod template as a Pod that podman 4.3's `kube play` runs, for the DaemonSet
// pod test (test/e2e/image/pod.test.ts): each rewrite, and why, is listed at renderPod.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { REPO } from '../env.js';

const ds = parse(readFileSync(join(REPO, 'deploy/daemonset.yaml'), 'utf8'));
/** The DaemonSet's pod template, as deploy/daemonset.yaml has it. */
export const template = ds.spec.template;
/** The manifest's stewardd container (its probes are run with `podman exec`). */
export const manifestMain = template.spec.containers.find((c: any) => c.name === 'stewardd');

/**
 * The DaemonSet's pod template as a Pod podman 4.3 runs. Each rewrite, and why:
 *  1. kind Pod named steward-<tag>, in the DaemonSet's namespace, with the template's labels;
 *  2. every image -> the image built here (`image`);
 *  3. the POD_NAMESPACE fieldRef (metadata.namespace) -> that namespace as a literal: podman 4.3
 *     refuses the fieldPath (the labels fieldRef for STEWARD_DAEMONSET is kept: podman supports it);
 *  4. restartPolicy OnFailure: a DaemonSet's Always would make podman re-run the init container;
 *  5. the probes are removed (podman 4.3 drops startup and readiness probes, and liveness needs
 *     systemd timers, absent here): the test runs each probe's own command with `podman exec`;
 *  6. only for the delete: --uninstall-on-delete auto -> always, what `kubectl delete ds` means
 *     to the daemon; there is no API server to ask here (auto outside a cluster keeps the install);
 *  7. the HOST_IP fieldRef (status.hostIP), where --metrics-listen binds -> 127.0.0.1: podman 4.3
 *     refuses that fieldPath too, and loopback keeps the test's listener off the machine's interfaces;
 *  8. the containers' `ports` are removed: podman 4.3 refuses port mappings with host networking
 *     ("PortMappings can only be used with Bridge or slirp4netns networking"); with hostNetwork the
 *     port is the host's own anyway, and the test scrapes it there;
 *  9. `$(NAME)` references in args are expanded from the container's env, as the kubelet does:
 *     podman 4.3 passes them through literally (the daemon would try to listen on "$(HOST_IP)").
 * Kept as written and honoured by podman: hostNetwork (so podman writes no conflist of its own),
 * privileged, the hostPath volumes at their real host paths, mountPropagation, resources,
 * terminationGracePeriodSeconds. Not honoured by podman 4.3 (not rewritten): hostPID, which it
 * ignores (the pod gets a PID namespace of its own), and the service account, tolerations and
 * priority class, which mean nothing without a cluster.
 */
export function renderPod(onDelete: 'manifest' | 'always', o: { name: string; image: string; dir: string }): string {
  const spec = structuredClone(template.spec);
  for (const c of [...spec.initContainers, ...spec.containers]) {
    c.image = o.image;
    for (const e of c.env ?? []) {
      const literal = { 'metadata.namespace': ds.metadata.namespace, 'status.hostIP': '127.0.0.1' }[
        e.valueFrom?.fieldRef?.fieldPath as string
      ];
      if (literal !== undefined) {
        delete e.valueFrom;
        e.value = literal;
      }
    }
    delete c.ports;
    const vars = Object.fromEntries(
      (c.env ?? []).filter((e: any) => typeof e.value === 'string').map((e: any) => [e.name, e.value]),
    );
    if (Array.isArray(c.args))
      c.args = c.args.map((a: string) => a.replace(/\$\((\w+)\)/g, (m: string, n: string) => vars[n] ?? m));
    delete c.startupProbe;
    delete c.readinessProbe;
    delete c.livenessProbe;
    if (onDelete === 'always' && Array.isArray(c.args)) {
      const i = c.args.indexOf('--uninstall-on-delete');
      if (i >= 0) c.args[i + 1] = 'always';
    }
  }
  spec.restartPolicy = 'OnFailure';
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: o.name, namespace: ds.metadata.namespace, labels: template.metadata.labels },
    spec,
  };
  const file = join(o.dir, `pod-${onDelete}.yaml`);
  writeFileSync(file, stringify(pod));
  return file;
}
