// The page's API client: plain requests, and an informer that lists, then
// watches from the list's resourceVersion, resumes from the last one it
// saw, and lists again when told 410 Gone, as client-go's Reflector does.
// Open the browser's network tab to see each list and watch go by.

// sent is told of every write the page makes, so that the page can show
// it: the buttons teach the API as much as the cluster.
let sent = () => {};
export function onSent(f) { sent = f; }

// request sends one request and returns {status, body}; body is the
// decoded JSON answer (an object or a Status).
export async function request(method, path, body, contentType = 'application/json') {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    init.headers['Content-Type'] = contentType;
  }
  const resp = await fetch(path, init);
  let answer = null;
  try { answer = await resp.json(); } catch { /* not JSON */ }
  if (method !== 'GET') {
    sent({ method, path, contentType: body === undefined ? '' : contentType, body: init.body, status: resp.status, answer });
  }
  return { status: resp.status, body: answer };
}

// The informers' shared counters, for the status line and the tests.
// applied is the main-thread time of each watch event applied (the last
// 10,000); listed is how long the last list took to arrive and replaced
// how long it took to draw, by resource.
export const stats = { lists: 0, watches: 0, gone: 0, applied: [], listed: {}, replaced: {} };

// later runs f with the other changes that arrived since the last frame,
// in the order they arrived: the page lays itself out once a frame, not
// once a change (in a hidden tab, which gets no frames, on a timer).
const pending = [];
let scheduled = false;
export function later(f) {
  pending.push(f);
  if (scheduled) return;
  scheduled = true;
  const flush = () => {
    scheduled = false;
    for (const g of pending.splice(0)) g();
  };
  if (document.hidden) setTimeout(flush, 50);
  else requestAnimationFrame(flush);
}

// tableAccept asks for a meta.k8s.io Table, as `kubectl get` and
// `kubectl get -w` do: one row of the columns kubectl prints per object,
// and the object's metadata only (includeObject=Metadata), instead of the
// whole object.
const tableAccept = 'application/json;as=Table;v=v1;g=meta.k8s.io, application/json';

// A Row is one object of a Table: its metadata, its cells by column name
// (cells.Status is kubectl's STATUS) and its row conditions.
function rows(table, columns) {
  const names = columns.map(c => c.name);
  return (table.rows ?? []).map(r => {
    const cells = {};
    for (let i = 0; i < names.length; i++) cells[names[i]] = r.cells[i];
    return { metadata: r.object.metadata, cells, conditions: r.conditions ?? [] };
  });
}

// An Informer keeps one resource's objects by "namespace/name" (or name)
// and tells handlers.replace(items) after each list and
// handlers.event(type, obj) for each watch event. An informer of tables
// ({table: true}) keeps Rows instead of objects: what a page of thousands
// of cards needs to draw, at half the bytes to read and parse.
export class Informer {
  constructor(resource, path, handlers, { table = false } = {}) {
    this.resource = resource;
    this.path = path;
    this.handlers = handlers;
    this.headers = table ? { Accept: tableAccept } : {};
    this.columns = null; // a Table's columns, from the list and each watch's first event
    this.synced = false; // listed once
    this.rv = '';
    this.paused = false;
    this.abort = null;
    this.wake = null;
  }

  start() { this.run(); return this; }

  // pause ends the watch; resume starts it again from the last
  // resourceVersion seen, which may by then be too old (410: list again).
  pause() {
    this.paused = true;
    if (this.abort) this.abort.abort();
  }

  resume() {
    this.paused = false;
    if (this.wake) this.wake();
  }

  async run() {
    for (;;) {
      if (this.paused) await new Promise(r => { this.wake = r; });
      try {
        if (!this.rv) await this.list();
        await this.watch();
      } catch (err) {
        if (err.name !== 'AbortError') {
          this.handlers.status?.(`${this.resource}: ${err.message}; retrying`);
          await new Promise(r => setTimeout(r, 1000));
        }
      }
    }
  }

  // list reads every object and starts the watch from the list's
  // resourceVersion, as a Reflector does. The first list asks for
  // resourceVersion=0, any version the server has at hand: it is answered
  // from the watch cache, whole, without pages. A list after 410 Gone asks
  // for the latest, read from etcd in pages of 500.
  async list() {
    const started = performance.now();
    const items = [];
    let cont = '';
    let rv = '';
    for (;;) {
      const q = new URLSearchParams({ limit: '500' });
      if (cont) q.set('continue', cont);
      else if (!this.synced) q.set('resourceVersion', '0');
      const url = `${this.path}?${q}`;
      const { status, ok, list } = await (firstList(url, this.headers.Accept ?? '') ??
        readList(this.resource, fetch(url, { headers: this.headers })));
      if (status === 410 && cont) { // the continue token expired: start over
        cont = '';
        items.length = 0;
        continue;
      }
      if (!ok || !list) throw new Error(`list ${status} ${list?.message ?? ''}`);
      if (list.kind === 'Table') {
        this.columns = list.columnDefinitions;
        items.push(...rows(list, this.columns));
      } else {
        items.push(...list.items);
      }
      cont = list.metadata.continue ?? '';
      rv = list.metadata.resourceVersion;
      if (!cont) break;
    }
    stats.lists++;
    stats.listed[this.resource] = performance.now() - started;
    this.rv = rv;
    this.synced = true;
    performance.mark(`ui:${this.resource}-rows`);
    later(() => {
      const t0 = performance.now();
      performance.mark(`ui:${this.resource}-draw`);
      this.handlers.replace(items);
      stats.replaced[this.resource] = performance.now() - t0;
    });
  }

  // watch reads the chunked stream, one JSON event a line, until it ends,
  // is aborted, or says 410 Gone (then the next round lists again).
  async watch() {
    this.abort = new AbortController();
    const q = new URLSearchParams({
      watch: 'true', resourceVersion: this.rv, allowWatchBookmarks: 'true',
      // Like a Reflector, end each watch after a while and resume: a
      // server restarts its watches, the client never notices.
      timeoutSeconds: String(300 + Math.floor(Math.random() * 300)),
    });
    const resp = await fetch(`${this.path}?${q}`, { headers: this.headers, signal: this.abort.signal });
    if (resp.status === 410) { this.gone(); return; }
    if (!resp.ok) throw new Error(`watch ${resp.status}`);
    stats.watches++;
    this.handlers.status?.('');
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim() === '') continue;
        const ev = JSON.parse(line);
        if (ev.type === 'ERROR') {
          if (ev.object?.code === 410) { this.gone(); reader.cancel(); return; }
          throw new Error(`watch error ${ev.object?.code}: ${ev.object?.message}`);
        }
        this.rv = ev.object.metadata.resourceVersion;
        let obj = ev.object;
        // A Table of one row; the columns come with the stream's first
        // event, which may be a bookmark (a Table without rows).
        if (obj.kind === 'Table' && obj.columnDefinitions) this.columns = obj.columnDefinitions;
        if (ev.type === 'BOOKMARK') continue;
        if (obj.kind === 'Table') obj = rows(obj, this.columns)[0];
        later(() => {
          const t0 = performance.now();
          this.handlers.event(ev.type, obj);
          record(performance.now() - t0);
        });
      }
    }
  }

  gone() {
    stats.gone++;
    this.rv = '';
    this.handlers.status?.(`${this.resource}: 410 Gone, listing again`);
  }
}

// readList waits for the answer to a list and reads it: its status and
// the list (or Status) it decodes to, null if it is not JSON. Each step is
// marked for the Performance API (ui:pods-response, ui:pods-text,
// ui:pods-parsed): with thousands of objects, reading the body and
// parsing it are what a first list waits for most. index.html reads its
// lists the same way.
async function readList(resource, answer) {
  const resp = await answer;
  performance.mark(`ui:${resource}-response`);
  const text = await resp.text();
  performance.mark(`ui:${resource}-text`);
  let list = null;
  try { list = JSON.parse(text); } catch { /* not JSON */ }
  performance.mark(`ui:${resource}-parsed`);
  return { status: resp.status, ok: resp.ok, list };
}

// firstList is a list index.html sent early and read (as readList
// does), exactly this one, taken once; or undefined.
function firstList(url, accept) {
  const key = `${accept} ${url}`;
  const resp = window.firstLists?.get(key);
  window.firstLists?.delete(key);
  return resp;
}

// record keeps the main-thread time of the last 10,000 applied events.
function record(ms) {
  if (stats.applied.length >= 10000) stats.applied.shift();
  stats.applied.push(ms);
}

// keyOf is the informer key of an object: "namespace/name" or "name".
export function keyOf(obj) {
  const m = obj.metadata;
  return m.namespace ? `${m.namespace}/${m.name}` : m.name;
}

// follow streams /debug/timeline with the given filter and calls
// onEntry for each line; it returns a function that stops it.
export function follow(query, onEntry) {
  const abort = new AbortController();
  (async () => {
    while (!abort.signal.aborted) {
      try {
        const resp = await fetch(`/debug/timeline?${new URLSearchParams(query)}`, { signal: abort.signal });
        if (!resp.ok) throw new Error(`timeline ${resp.status}`);
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let nl;
          while ((nl = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (line) onEntry(JSON.parse(line));
          }
        }
      } catch (err) {
        if (err.name === 'AbortError') return;
      }
      await new Promise(r => setTimeout(r, 1000));
    }
  })();
  return () => abort.abort();
}
