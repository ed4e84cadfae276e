// The cluster view: one column per node, its pods as cards grouped by
// their controlling owner, and a lane for pods no node has yet. Every
// watch event changes only the elements of the object it names, so that
// a cluster of thousands of pods stays cheap to follow.
import { keyOf } from './api.js';

const pendingLane = () => document.querySelector('#pending .pods');

export class ClusterView {
  constructor(onOpen) {
    this.onOpen = onOpen;
    this.nodes = new Map();   // name → {obj, el, pods}
    this.cards = new Map();   // pod key → {el, group}
    this.groups = new Map();  // "node|ownerKey" → {el, pods, count}
    this.namespace = '';
    // One listener for every card: two thousand cards need no two
    // thousand listeners to be drawn.
    document.getElementById('cluster').addEventListener('click', e => {
      const card = e.target.closest('.pod');
      if (card) this.onOpen('Pod', card.dataset.key);
    });
  }

  // --- nodes ---

  replaceNodes(items) {
    const seen = new Set(items.map(n => n.metadata.name));
    for (const name of [...this.nodes.keys()]) if (!seen.has(name)) this.deleteNode(name);
    for (const n of items) this.setNode(n);
  }

  setNode(node) {
    const name = node.metadata.name;
    let n = this.nodes.get(name);
    if (!n) {
      const el = document.createElement('div');
      el.className = 'node';
      el.dataset.node = name;
      el.innerHTML = '<h2 class="node-name"></h2><dl class="node-facts"></dl><div class="pods"></div>';
      el.querySelector('.node-name').addEventListener('click', () => this.onOpen('Node', name));
      n = { el, pods: el.querySelector('.pods') };
      this.nodes.set(name, n);
      insertSorted(document.getElementById('nodes'), el, name, e => e.dataset.node);
      // Pods that named this node before it was known move in.
      for (const g of [...this.groups.values()]) if (g.node === name) n.pods.append(g.el);
    }
    n.obj = node;
    const ready = nodeReady(node);
    n.el.dataset.ready = ready;
    n.el.classList.toggle('cordoned', !!node.spec?.unschedulable);
    n.el.querySelector('.node-name').textContent = name;
    const taints = (node.spec?.taints ?? []).map(t => `${t.key}${t.value ? '=' + t.value : ''}:${t.effect}`);
    const facts = [
      ['status', ready + (node.spec?.unschedulable ? ', SchedulingDisabled' : '')],
      ['zone', node.metadata.labels?.['topology.kubernetes.io/zone'] ?? '–'],
      ['pod CIDR', node.spec?.podCIDR ?? '–'],
      ['taints', taints.length ? taints.join(', ') : 'none'],
    ];
    const dl = n.el.querySelector('.node-facts');
    dl.replaceChildren(...facts.flatMap(([k, v]) => [el('dt', k), el('dd', v, k === 'status' ? 'status' : '')]));
  }

  deleteNode(name) {
    const n = this.nodes.get(name);
    if (!n) return;
    this.nodes.delete(name);
    // Its pods' groups wait in the pending lane's place until the pods go.
    for (const g of n.pods.querySelectorAll('.group')) pendingLane().append(g);
    n.el.remove();
  }

  // --- pods ---

  replacePods(items) {
    const seen = new Set(items.map(keyOf));
    for (const key of [...this.cards.keys()]) if (!seen.has(key)) this.deletePod(key, false);
    for (const p of items) this.setPod(p, false);
    // A group out of sight is not laid out (content-visibility in
    // style.css) and holds the place of its height once seen; until then,
    // of rows of about three cards.
    for (const g of this.groups.values()) g.el.style.containIntrinsicBlockSize = `auto ${1.5 + 1.5 * Math.ceil(g.count / 3)}em`;
  }

  setPod(pod, animate = true) {
    const key = keyOf(pod);
    let c = this.cards.get(key);
    if (!c) {
      const el = document.createElement('button');
      el.type = 'button';
      el.className = animate ? 'pod enter' : 'pod';
      el.dataset.key = key;
      c = { el };
      this.cards.set(key, c);
    }
    const { phase, ready, terminating, status, ip } = podState(pod, c.el.dataset.phase);
    c.el.dataset.phase = phase;
    c.el.dataset.ready = ready;
    c.el.classList.toggle('terminating', terminating);
    c.el.title = `${key}\n${status}${ready === 'true' ? ', Ready' : ', not ready'}` + (ip ? `\nIP ${ip}` : '');
    c.el.textContent = shortName(pod);
    const groupKey = `${podNode(pod)}|${ownerKey(pod)}`;
    if (c.group?.key !== groupKey) {
      if (c.group) this.leave(c.group);
      c.group = this.group(groupKey, pod);
      c.group.count++;
      c.group.pods.append(c.el);
    }
  }

  deletePod(key, animate = true) {
    const c = this.cards.get(key);
    if (!c) return;
    this.cards.delete(key);
    const group = c.group;
    let gone = false;
    const done = () => {
      if (gone) return;
      gone = true;
      c.el.remove();
      this.leave(group);
    };
    if (!animate) { done(); return; }
    c.el.classList.add('leave');
    c.el.addEventListener('animationend', done, { once: true });
    setTimeout(done, 600); // no animation (reduced motion, hidden tab): remove anyway
  }

  // group returns the group of pods of one owner on one node (or pending).
  group(key, pod) {
    let g = this.groups.get(key);
    if (g) return g;
    const [node, owner] = [key.slice(0, key.indexOf('|')), key.slice(key.indexOf('|') + 1)];
    const el = document.createElement('div');
    el.className = 'group';
    el.dataset.owner = owner;
    el.dataset.namespace = pod.metadata.namespace;
    el.hidden = this.namespace !== '' && this.namespace !== pod.metadata.namespace;
    const label = document.createElement('a');
    label.className = 'owner';
    label.href = '#';
    label.textContent = owner.slice(owner.indexOf('/') + 1);
    const ref = controllerOf(pod);
    label.addEventListener('click', e => {
      e.preventDefault();
      if (ref) this.onOpen(ref.kind, `${pod.metadata.namespace}/${ref.name}`);
    });
    const pods = document.createElement('div');
    pods.className = 'cards';
    el.append(label, pods);
    g = { key, node, el, pods, count: 0 };
    this.groups.set(key, g);
    const where = node && this.nodes.has(node) ? this.nodes.get(node).pods : pendingLane();
    insertSorted(where, el, owner, e => e.dataset.owner);
    return g;
  }

  leave(g) {
    if (--g.count > 0 || this.groups.get(g.key) !== g) return;
    this.groups.delete(g.key);
    g.el.remove();
  }

  setNamespace(ns) {
    this.namespace = ns;
    for (const g of this.groups.values()) g.el.hidden = ns !== '' && g.el.dataset.namespace !== ns;
  }
}

// nodeReady is how kubectl shows a node: its Ready condition's status.
export function nodeReady(node) {
  const c = (node.status?.conditions ?? []).find(c => c.type === 'Ready');
  switch (c?.status) {
    case 'True': return 'Ready';
    case 'False': return 'NotReady';
    default: return 'Unknown';
  }
}

// podState is how a pod's card looks: its phase, whether it is Ready,
// terminating, kubectl's STATUS and its IP. The page keeps pods as table
// rows (api.js), the columns `kubectl get pods -o wide` prints; a whole
// pod (from a GET) works too.
export function podState(pod, was = '') {
  const terminating = !!pod.metadata.deletionTimestamp;
  if (!pod.cells) {
    const ready = (pod.status?.conditions ?? []).find(c => c.type === 'Ready')?.status === 'True';
    const phase = pod.status?.phase ?? 'Pending';
    return { phase, ready: String(ready), terminating, status: terminating ? 'Terminating' : phase, ip: pod.status?.podIP ?? '' };
  }
  const c = pod.cells;
  // READY counts the containers that are ready, and the pod's Ready
  // condition is theirs and its readiness gates'.
  const [n, of] = String(c.Ready).split('/').map(Number);
  const gates = c['Readiness Gates'] ?? '<none>';
  const gatesOK = gates === '<none>' || gates.split('/')[0] === gates.split('/')[1];
  return {
    phase: rowPhase(pod, was),
    ready: String(of > 0 && n === of && gatesOK),
    terminating,
    status: c.Status,
    ip: c.IP && c.IP !== '<none>' ? c.IP : '',
  };
}

// Waiting reasons of a pod whose containers have not started yet.
const waiting = new Set(['Pending', 'ContainerCreating', 'PodInitializing', 'SchedulingGated', 'ErrImagePull',
  'ImagePullBackOff', 'InvalidImageName', 'CreateContainerConfigError', 'CreateContainerError']);

// rowPhase reads the phase back from a pod's row: a finished pod's row
// says Completed with the phase as its reason; STATUS is the phase, a
// waiting reason before the containers start (Pending) or a container's
// reason once they have (Running: CrashLoopBackOff, Error...). A
// terminating pod keeps the phase its card had.
function rowPhase(pod, was) {
  const done = pod.conditions.find(c => c.type === 'Completed' && c.status === 'True');
  if (done) return done.reason;
  const s = pod.cells.Status;
  if (s === 'Running' || s === 'Unknown') return s;
  if (waiting.has(s) || s.startsWith('Init:')) return 'Pending';
  if (s === 'Terminating') return was || 'Running';
  return 'Running';
}

// podNode is the node a pod is bound to, or '' before it is scheduled.
export function podNode(pod) {
  const n = pod.cells ? pod.cells.Node : pod.spec?.nodeName;
  return n && n !== '<none>' ? n : '';
}

export function controllerOf(obj) {
  return (obj.metadata.ownerReferences ?? []).find(r => r.controller);
}

function ownerKey(pod) {
  const ref = controllerOf(pod);
  return `${pod.metadata.namespace}/${ref ? `${ref.kind}/${ref.name}` : '(no owner)'}`;
}

// shortName drops the owner's name from a pod's name: web-7d4f9-x2k8p
// shows as x2k8p under the group web-7d4f9.
function shortName(pod) {
  const ref = controllerOf(pod);
  const name = pod.metadata.name;
  return ref && name.startsWith(ref.name + '-') ? name.slice(ref.name.length + 1) : name;
}

function el(tag, text, cls = '') {
  const e = document.createElement(tag);
  e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

// byName orders names as people read them: node-2 before node-10. One
// collator for all: localeCompare with options makes one a call.
const byName = new Intl.Collator(undefined, { numeric: true });

// insertSorted puts child among parent's children in order of name.
function insertSorted(parent, child, name, nameOf) {
  for (const c of parent.children) {
    if (c !== child && byName.compare(nameOf(c), name) > 0) {
      parent.insertBefore(child, c);
      return;
    }
  }
  parent.append(child);
}
