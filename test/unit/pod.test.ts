import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { podFromCniArgs, podLabel, podLogFields } from '../../shared/src/cni/pod.js';

describe('podFromCniArgs', () => {
  test('reads namespace, name and uid from the CNI_ARGS the kubelet runtimes pass', () => {
    const pod = podFromCniArgs(
      'IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=1f2e-33',
    );
    assert.deepEqual(pod, { namespace: 'team-a', name: 'web-0', uid: '1f2e-33' });
    assert.equal(podLabel(pod), 'team-a/web-0');
    assert.deepEqual(podLogFields(pod), { podNamespace: 'team-a', podName: 'web-0', podUid: '1f2e-33' });
  });

  test('names no pod when CNI_ARGS has none, and never throws on malformed input', () => {
    for (const raw of [
      '',
      undefined,
      null,
      ';;;',
      '=x;K8S_POD_NAME',
      'K8S_POD_NAME=;K8S_POD_NAMESPACE=',
      'garbage',
      '%%%=;=;==',
    ]) {
      assert.deepEqual(podFromCniArgs(raw), { namespace: null, name: null, uid: null }, String(raw));
    }
    assert.deepEqual(podLogFields(podFromCniArgs('')), {});
    assert.equal(podLabel(podFromCniArgs('')), null);
  });

  test('keeps what it can from a partly malformed CNI_ARGS', () => {
    assert.deepEqual(podFromCniArgs('bogus;K8S_POD_NAME=a=b;=;K8S_POD_NAMESPACE=ns'), {
      namespace: 'ns',
      name: 'a=b',
      uid: null,
    });
    assert.equal(podLabel({ namespace: null, name: 'solo' }), 'solo');
  });

  test('ignores keys that only look like ours', () => {
    assert.deepEqual(podFromCniArgs('k8s_pod_name=x;K8S_POD_NAMEX=y;__proto__=z;constructor=w'), {
      namespace: null,
      name: null,
      uid: null,
    });
  });
});
