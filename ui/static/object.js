// An object: its YAML, its owners and what it owns, its conditions and
// events, and the path its last change took through the informers of the
// components that watch it.
import { request, follow, keyOf } from './api.js';
import { controllerOf } from './cluster.js';
import { toYAML } from './yaml.js';
import { actionsFor } from './poke.js';

// Where each kind the page can open lives in the API.
const paths = {
  Pod: ['/api/v1', 'pods'], Node: ['/api/v1', 'nodes'], Namespace: ['/api/v1', 'namespaces'],
  Service: ['/api/v1', 'services'], ReplicationController: ['/api/v1', 'replicationcontrollers'],
  ReplicaSet: ['/apis/apps/v1', 'replicasets'], Deployment: ['/apis/apps/v1', 'deployments'],
  StatefulSet: ['/apis/apps/v1', 'statefulsets'], DaemonSet: ['/apis/apps/v1', 'daemonsets'],
  Job: ['/apis/batch/v1', 'jobs'], CronJob: ['/apis/batch/v1', 'cronjobs'],
  PodDisruptionBudget: ['/apis/policy/v1', 'poddisruptionbudgets'],
};

export function pathOf(kind, key) {
  const [prefix, plural] = paths[kind] ?? [];
  if (!prefix) return '';
  const i = key.indexOf('/');
  return i < 0 ? `${prefix}/${plural}/${key}` : `${prefix}/namespaces/${key.slice(0, i)}/${plural}/${key.slice(i + 1)}`;
}

// The informer pipeline, in the order a change passes it.
const pipeline = ['watch event', 'reflector received', 'deltafifo queued', 'deltafifo popped',
  'indexer updated', 'handler called', 'key enqueued', 'worker reconciled', 'write'];

export class ObjectPanel {
  // caches: kind → Map(key → object), the informers' objects.
  constructor(caches, onOpen) {
    this.caches = caches;
    this.onOpen = onOpen;
    this.el = document.getElementById('object');
    document.getElementById('object-close').addEventListener('click', () => this.close());
    this.kind = '';
    this.key = '';
    this.stopPath = null;
    this.entries = [];
  }

  async open(kind, key) {
    let obj = await this.lookup(kind, key);
    if (!obj) { // the timeline names objects, not kinds: try what the page watches
      for (const [k, m] of Object.entries(this.caches)) {
        if (m.has(key)) { kind = k; obj = await this.lookup(k, key) ?? m.get(key); break; }
      }
    }
    this.close();
    this.kind = kind;
    this.key = key;
    this.el.hidden = false;
    this.el.dataset.kind = kind;
    this.el.dataset.key = key;
    document.getElementById('object-title').textContent = `${kind} ${key}`;
    this.render(obj);
    this.stopPath = follow({ stages: 'true', object: key }, e => this.onStage(e));
  }

  close() {
    if (this.stopPath) this.stopPath();
    this.stopPath = null;
    this.entries = [];
    this.el.hidden = true;
    this.kind = this.key = '';
    document.getElementById('object-path').innerHTML = '<p class="hint">waiting for its next change: poke it</p>';
  }

  // lookup is the object from the page's cache if it is kept whole there
  // (nodes), else from the API: pods are kept as table rows, metadata only.
  async lookup(kind, key) {
    const cached = this.caches[kind]?.get(key);
    if (cached && !cached.cells) return cached;
    const path = pathOf(kind, key);
    if (!path) return null;
    const { status, body } = await request('GET', path);
    return status === 200 ? body : null;
  }

  // changed is called by the informers: the open object is redrawn when
  // it changes.
  changed(kind, obj) {
    if (kind !== this.kind || keyOf(obj) !== this.key) return;
    if (obj.cells) this.refresh(); // a row: read the whole object
    else this.render(obj);
  }

  // refresh reads the open object again, after a button changed it.
  async refresh() {
    const { kind, key } = this;
    const { status, body } = await request('GET', pathOf(kind, key));
    if (status === 200 && this.kind === kind && this.key === key) this.render(body);
  }

  deleted(kind, key) {
    if (kind === this.kind && key === this.key) {
      document.getElementById('object-title').textContent = `${kind} ${key} (deleted)`;
    }
  }

  async render(obj) {
    const kind = this.kind;
    const key = this.key;
    document.getElementById('object-actions').replaceChildren(...(obj ? actionsFor(kind, obj, this.caches, () => this.refresh()) : []));
    document.getElementById('object-yaml').textContent = obj ? toYAML(obj) : 'not found';
    if (!obj) return;
    // Conditions.
    const rows = (obj.status?.conditions ?? []).map(c => row(c.type, c.status, c.reason ?? '', c.lastTransitionTime ?? ''));
    document.querySelector('#object-conditions tbody').replaceChildren(...rows);
    // Owners, up to the top, then what it owns.
    const chain = [[kind, key]];
    let cur = obj;
    for (let i = 0; i < 5 && cur; i++) {
      const ref = controllerOf(cur);
      if (!ref) break;
      const k = `${cur.metadata.namespace ? cur.metadata.namespace + '/' : ''}${ref.name}`;
      chain.unshift([ref.kind, k]);
      cur = await this.lookup(ref.kind, k);
    }
    document.getElementById('object-owners').replaceChildren(...chain.map(([k, n]) => li(this.link(k, n))));
    const owns = await this.owned(kind, obj);
    owns.sort((a, b) => a[1].localeCompare(b[1]));
    document.getElementById('object-owns').replaceChildren(
      ...(owns.length ? owns.map(([k, n]) => li(this.link(k, n))) : [li(text('owns nothing'))]));
    // Events, newest last, as kubectl describe shows them.
    const ns = obj.metadata.namespace;
    const q = new URLSearchParams({ fieldSelector: `involvedObject.name=${obj.metadata.name},involvedObject.kind=${kind}` });
    const { status, body } = await request('GET', `/api/v1/${ns ? `namespaces/${ns}/` : 'namespaces/default/'}events?${q}`);
    if (this.key !== key) return; // another object was opened meanwhile
    const events = status === 200 ? body.items : [];
    events.sort((a, b) => (a.lastTimestamp ?? a.eventTime ?? '').localeCompare(b.lastTimestamp ?? b.eventTime ?? ''));
    document.getElementById('object-events').replaceChildren(...(events.length ? events.map(e => li(text(
      `${e.type} ${e.reason} (${e.source?.component ?? e.reportingComponent ?? ''}${e.count > 1 ? ` ×${e.count}` : ''}): ${e.message}`))) : [li(text('no events'))]));
  }

  // owned lists what obj controls: pods from the page's cache, the
  // ReplicaSets of a Deployment and the Jobs of a CronJob from the API.
  async owned(kind, obj) {
    const children = { Deployment: 'ReplicaSet', CronJob: 'Job' };
    const ns = obj.metadata.namespace;
    let candidates = [...this.caches.Pod.values()].map(p => ['Pod', p]);
    if (children[kind]) {
      const [prefix, plural] = paths[children[kind]];
      const { status, body } = await request('GET', `${prefix}/namespaces/${ns}/${plural}`);
      candidates = status === 200 ? body.items.map(o => [children[kind], o]) : [];
    }
    return candidates.filter(([, o]) => controllerOf(o)?.uid === obj.metadata.uid).map(([k, o]) => [k, keyOf(o)]);
  }

  link(kind, key) {
    const a = document.createElement('a');
    a.href = '#';
    a.textContent = `${kind} ${key}`;
    a.addEventListener('click', e => { e.preventDefault(); this.onOpen(kind, key); });
    return a;
  }

  // onStage collects the timeline's lines about the object: the informer
  // stages of each component that watches it, and the decisions that
  // followed. A change is known by the resourceVersion its stages carry.
  onStage(e) {
    if (e.object !== this.key) return;
    this.entries.push(e);
    const rvOf = x => /rv=(\d+)/.exec(x.message)?.[1];
    let last = '';
    for (const x of this.entries) if (x.stage && rvOf(x)) last = rvOf(x);
    const first = this.entries.find(x => x.stage && rvOf(x) === last);
    if (!first) return;
    const start = Date.parse(first.time);
    const steps = this.entries.filter(x => Date.parse(x.time) >= start && (!x.stage || rvOf(x) === last));
    this.entries = this.entries.filter(x => Date.parse(x.time) >= start);
    drawPath(last, steps);
  }
}

// drawPath draws the change's steps per component, in pipeline order,
// with the milliseconds since the step before.
function drawPath(rv, steps) {
  const lanes = new Map();
  for (const s of steps) {
    const lane = s.stage ? s.component : 'decisions';
    if (!lanes.has(lane)) lanes.set(lane, []);
    lanes.get(lane).push(s);
  }
  const out = [text(`resourceVersion ${rv}`, 'p')];
  const t0 = Math.min(...steps.map(s => Date.parse(s.time) + fraction(s.time)));
  for (const [lane, list] of lanes) {
    const ol = document.createElement('ol');
    ol.className = 'sequence';
    ol.dataset.component = lane;
    let prev = t0;
    for (let i = 0; i < list.length; i++) {
      const s = list[i];
      const t = Date.parse(s.time) + fraction(s.time);
      // One informer calls each registered handler in turn: one step, ×n.
      let n = 1;
      while (s.stage && list[i + 1]?.stage === s.stage) { n++; i++; }
      const item = document.createElement('li');
      item.dataset.stage = s.stage || 'write';
      const label = s.stage ? s.stage + (n > 1 ? ` ×${n}` : '') : `${s.component}: ${s.message}`;
      item.append(text(`+${(t - prev).toFixed(1)} ms`, 'span', 'delta'), text(label, 'span', 'step'));
      item.title = `${s.time} ${s.message}`;
      ol.append(item);
      prev = t;
    }
    const wrap = document.createElement('div');
    wrap.append(text(lane === 'decisions' ? 'reconcile → write' : `${lane}'s informers`, 'h4'), ol);
    out.push(wrap);
  }
  const seen = new Set(steps.map(s => s.stage || 'write'));
  const legend = pipeline.map(p => text(p, 'span', seen.has(p) || p === 'watch event' ? 'on' : 'off'));
  const legendEl = document.createElement('p');
  legendEl.className = 'pipeline';
  legendEl.append(...legend);
  legendEl.title = 'greyed: this step is not traced by the components for this change';
  out.push(legendEl);
  document.getElementById('object-path').replaceChildren(...out);
}

// fraction is the sub-millisecond part of an RFC 3339 time, which
// Date.parse drops.
function fraction(t) {
  const m = /\.\d{3}(\d+)/.exec(t);
  return m ? Number('0.' + m[1]) : 0;
}

function row(...cells) {
  const tr = document.createElement('tr');
  for (const c of cells) tr.append(text(c, 'td'));
  return tr;
}

function li(child) {
  const e = document.createElement('li');
  e.append(child);
  return e;
}

function text(s, tag = 'span', cls = '') {
  const e = document.createElement(tag);
  e.textContent = s;
  if (cls) e.className = cls;
  return e;
}
