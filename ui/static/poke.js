// Poke it: the buttons do what the lessons do with curl, through the same
// API, and the page lists each request they send (method, path, body).
import { request, keyOf } from './api.js';
import { pathOf } from './object.js';
import { podNode } from './cluster.js';

const merge = 'application/merge-patch+json';
const heartbeat = 'sim.minictl.io/heartbeat';
const ready = 'sim.minictl.io/ready';
const exitCode = 'sim.minictl.io/exit-code';

function annotate(path, key, value) {
  return request('PATCH', path, { metadata: { annotations: { [key]: value } } }, merge);
}

export const actions = {
  deletePod: pod => request('DELETE', pathOf('Pod', keyOf(pod))),
  // The kubelet takes a pod's readiness from this annotation.
  toggleReady: pod => annotate(pathOf('Pod', keyOf(pod)), ready, pod.metadata.annotations?.[ready] === 'false' ? null : 'false'),
  // The containers exit once per value: to make them exit again with the
  // same code, the annotation goes first.
  exit: async pod => {
    const path = pathOf('Pod', keyOf(pod));
    if (pod.metadata.annotations?.[exitCode] !== undefined) await annotate(path, exitCode, null);
    return annotate(path, exitCode, '1');
  },
  scale: (kind, obj, replicas) => request('PATCH', pathOf(kind, keyOf(obj)) + '/scale', { spec: { replicas } }, merge),
  toggleHeartbeat: node => annotate(pathOf('Node', node.metadata.name), heartbeat, node.metadata.annotations?.[heartbeat] === 'stop' ? null : 'stop'),
  cordon: (node, on) => request('PATCH', pathOf('Node', node.metadata.name), { spec: { unschedulable: on ? true : null } }, merge),
  // drain is kubectl drain by hand: cordon, then evict every pod on the
  // node but a DaemonSet's (its controller would put it back) and those
  // already going. A PodDisruptionBudget may answer 429.
  drain: async (node, pods) => {
    await actions.cordon(node, true);
    for (const pod of pods.values()) {
      if (podNode(pod) !== node.metadata.name || pod.metadata.deletionTimestamp) continue;
      if ((pod.metadata.ownerReferences ?? []).some(r => r.controller && r.kind === 'DaemonSet')) continue;
      await request('POST', pathOf('Pod', keyOf(pod)) + '/eviction', {
        apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod.metadata.name, namespace: pod.metadata.namespace },
      });
    }
  },
};

// actionsFor returns the buttons for one object; after is called once a
// button's requests are answered.
export function actionsFor(kind, obj, caches, after) {
  const b = (label, f, name) => {
    const e = document.createElement('button');
    e.type = 'button';
    e.textContent = label;
    e.dataset.action = name;
    e.addEventListener('click', async () => { await f(); after(); });
    return e;
  };
  const a = obj.metadata.annotations ?? {};
  switch (kind) {
    case 'Pod':
      return [
        b('delete pod', () => actions.deletePod(obj), 'delete'),
        b(a[ready] === 'false' ? 'make ready again' : 'make not ready', () => actions.toggleReady(obj), 'ready'),
        b('make its containers exit (1)', () => actions.exit(obj), 'exit'),
      ];
    case 'Node':
      return [
        b(a[heartbeat] === 'stop' ? 'resume heartbeat' : 'stop heartbeat', () => actions.toggleHeartbeat(obj), 'heartbeat'),
        b(obj.spec?.unschedulable ? 'uncordon' : 'cordon', () => actions.cordon(obj, !obj.spec?.unschedulable), 'cordon'),
        b('drain', () => actions.drain(obj, caches.Pod), 'drain'),
      ];
    case 'Deployment':
    case 'ReplicaSet':
    case 'StatefulSet': {
      const n = obj.spec?.replicas ?? 1;
      return [
        b(`scale to ${n + 1}`, () => actions.scale(kind, obj, n + 1), 'scale-up'),
        b(`scale to ${Math.max(0, n - 1)}`, () => actions.scale(kind, obj, Math.max(0, n - 1)), 'scale-down'),
      ];
    }
    default:
      return [];
  }
}

// showRequest adds one sent request, and its answer's code, to the list.
export function showRequest({ method, path, contentType, body, status, answer }) {
  const ol = document.querySelector('#requests ol');
  const li = document.createElement('li');
  li.className = status < 300 ? 'ok' : 'failed';
  const line = document.createElement('code');
  line.textContent = `${method} ${path}` + (contentType ? `  (Content-Type: ${contentType})` : '');
  const code = document.createElement('span');
  code.className = 'code';
  code.textContent = status < 300 ? String(status) : `${status} ${answer?.reason ?? ''}: ${answer?.message ?? ''}`;
  li.append(line, code);
  if (body) {
    const pre = document.createElement('pre');
    pre.textContent = body;
    li.append(pre);
  }
  ol.prepend(li);
  while (ol.childElementCount > 50) ol.lastElementChild.remove();
}
