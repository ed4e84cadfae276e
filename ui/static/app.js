// The page: informers for the objects it draws, the cluster view, the
// decisions, the object panel and the requests the buttons send.
import { Informer, keyOf, onSent, request, stats } from './api.js';
import { ClusterView } from './cluster.js';
import { Decisions } from './decisions.js';
import { ObjectPanel } from './object.js';
import { showRequest } from './poke.js';

performance.mark('ui:modules-run');

const caches = { Pod: new Map(), Node: new Map() };
const open = (kind, key) => panel.open(kind, key);
const view = new ClusterView(open);
const panel = new ObjectPanel(caches, open);
const decisions = new Decisions(open).start();
onSent(showRequest);

const statusEl = document.getElementById('status');
let problem = '';
function showStatus() {
  statusEl.textContent = problem || `${caches.Node.size} nodes, ${caches.Pod.size} pods · ${stats.lists} lists, ` +
    `${stats.watches} watches, ${stats.gone} × 410 Gone`;
}

// informer starts one resource's informer that keeps caches[kind] and
// tells the view and the panel.
function informer(kind, resource, path, draw = {}, options = {}) {
  const cache = caches[kind];
  return new Informer(resource, path, {
    replace(items) {
      cache.clear();
      for (const o of items) cache.set(keyOf(o), o);
      draw.replace?.(items);
      ready.add(kind);
      firstRender();
      showStatus();
    },
    event(type, obj) {
      const key = keyOf(obj);
      if (type === 'DELETED') {
        cache.delete(key);
        draw.delete?.(key);
        panel.deleted(kind, key);
      } else {
        cache.set(key, obj);
        draw.set?.(obj);
        panel.changed(kind, obj);
      }
      showStatusSoon();
    },
    status(s) { problem = s; showStatus(); },
  }, options).start();
}

// The status line is redrawn once a frame at most.
let statusQueued = false;
function showStatusSoon() {
  if (statusQueued) return;
  statusQueued = true;
  requestAnimationFrame(() => { statusQueued = false; showStatus(); });
}

// The first render is when nodes and pods are both drawn; it is marked for
// the Performance API (performance.getEntriesByName('ui:first-render')).
const ready = new Set();
let rendered = false;
function firstRender() {
  if (rendered || !ready.has('Node') || !ready.has('Pod')) return;
  rendered = true;
  performance.mark('ui:first-render');
  // The frame is laid out and painted once this task ends: a task queued
  // now runs after it.
  setTimeout(() => performance.mark('ui:first-render-painted'));
  document.body.dataset.ready = 'true';
}

// A browser keeps at most six connections to one server over HTTP/1.1,
// and every watch holds one: the page watches only what it draws (nodes
// and pods), follows the timeline, and reads the rest when it needs it,
// so that the buttons' requests always find a connection.
const informers = [
  informer('Node', 'nodes', '/api/v1/nodes', {
    replace: items => view.replaceNodes(items), set: n => view.setNode(n), delete: k => view.deleteNode(k),
  }),
  // Pods as table rows, as `kubectl get pods -w` reads them: a cluster of
  // thousands of pods lists and draws in a fraction of the time whole pods
  // take (a pod's panel reads the whole pod).
  informer('Pod', 'pods', '/api/v1/pods', {
    replace: items => view.replacePods(items), set: p => view.setPod(p), delete: k => view.deletePod(k),
  }, { table: true }),
];

// Namespaces: the filter's choices, listed again each time it is opened.
const nsSelect = document.getElementById('namespace');
const namespaces = new Set();
async function listNamespaces() {
  const { status, body } = await request('GET', '/api/v1/namespaces');
  if (status !== 200) return;
  for (const n of body.items) {
    const name = n.metadata.name;
    if (namespaces.has(name)) continue;
    namespaces.add(name);
    const o = document.createElement('option');
    o.value = o.textContent = name;
    nsSelect.append(o);
  }
}
listNamespaces();
nsSelect.addEventListener('focus', listNamespaces);
nsSelect.addEventListener('change', () => view.setNamespace(nsSelect.value));

// Pause stops every watch; resuming starts each from the last
// resourceVersion it saw, or lists again if that is gone (410).
const pauseButton = document.getElementById('pause');
pauseButton.addEventListener('click', () => {
  const paused = pauseButton.dataset.paused === 'true';
  for (const i of informers) paused ? i.resume() : i.pause();
  pauseButton.dataset.paused = String(!paused);
  pauseButton.textContent = paused ? 'pause watches' : 'resume watches';
});

// For tests and the curious, in the console: the counters and the
// main-thread time each applied watch event took.
window.minictl = { stats, caches, informers, decisions, panel };

// A button whose request could not be sent says so on the status line.
window.addEventListener('unhandledrejection', e => {
  problem = String(e.reason);
  showStatus();
});
