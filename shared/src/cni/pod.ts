// The Kubernetes pod a CNI call is for, as the runtime names it in CNI_ARGS
// (K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID: set by the kubelet's CRI runtimes on every call).
// Only for naming things in records, logs and the API: it never throws, and a malformed CNI_ARGS
// simply names no pod (validation of CNI_ARGS is parseCniArgs' job, where it matters).

export interface PodRef {
  namespace: string | null;
  name: string | null;
  uid: string | null;
}

const KEYS = { K8S_POD_NAMESPACE: 'namespace', K8S_POD_NAME: 'name', K8S_POD_UID: 'uid' } as const;

export function podFromCniArgs(args: string | undefined | null): PodRef {
  const pod: PodRef = { namespace: null, name: null, uid: null };
  if (typeof args !== 'string' || args === '') return pod;
  for (const pair of args.split(';')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    const key = pair.slice(0, eq).trim();
    const value = pair.slice(eq + 1).trim();
    if (Object.hasOwn(KEYS, key) && value !== '') pod[KEYS[key as keyof typeof KEYS]] = value;
  }
  return pod;
}

/** "namespace/name" for humans, or null when the runtime named no pod. */
export function podLabel(pod: { namespace: string | null; name: string | null }): string | null {
  if (pod.name === null) return null;
  return pod.namespace === null ? pod.name : `${pod.namespace}/${pod.name}`;
}

/** Log bindings naming the pod (empty when the call names none, so log lines stay short). */
export function podLogFields(pod: PodRef): Record<string, string> {
  const f: Record<string, string> = {};
  if (pod.namespace !== null) f.podNamespace = pod.namespace;
  if (pod.name !== null) f.podName = pod.name;
  if (pod.uid !== null) f.podUid = pod.uid;
  return f;
}
