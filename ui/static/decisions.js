// The decisions: the control plane's timeline, the lines `minictl trace`
// prints, streamed from /debug/timeline as they happen. Filtering is done
// here, so that changing a filter shows the lines already received.
import { follow, later } from './api.js';

const keep = 500; // lines kept on the page

export class Decisions {
  constructor(onOpen) {
    this.onOpen = onOpen;
    this.list = document.querySelector('#decisions ol');
    this.component = document.getElementById('decision-component');
    this.object = document.getElementById('decision-object');
    this.components = new Set();
    this.buffer = [];
    this.component.addEventListener('change', () => this.refilter());
    this.object.addEventListener('input', () => this.refilter());
  }

  start() {
    this.stop = follow({}, e => this.add(e));
    return this;
  }

  add(e) {
    if (!this.components.has(e.component)) {
      this.components.add(e.component);
      const o = document.createElement('option');
      o.value = o.textContent = e.component;
      this.component.append(o);
    }
    const li = document.createElement('li');
    li.dataset.component = e.component;
    li.dataset.object = e.object ?? '';
    if (e.level === 'WARN' || e.level === 'ERROR') li.className = 'warn';
    const time = document.createElement('time');
    time.textContent = clock(e.time);
    const comp = document.createElement('span');
    comp.className = 'component';
    comp.textContent = e.component;
    const obj = document.createElement('a');
    obj.className = 'object';
    obj.textContent = e.object || '–';
    if (e.object) {
      obj.href = '#';
      obj.addEventListener('click', ev => { ev.preventDefault(); this.onOpen(kindOf(e), e.object); });
    }
    const msg = document.createElement('span');
    msg.className = 'message';
    msg.textContent = e.message;
    li.append(time, comp, obj, msg);
    li.hidden = !this.matches(li);
    this.buffer.push(li);
    if (this.buffer.length === 1) later(() => this.flush());
  }

  // flush puts the lines received since the last frame on the page,
  // newest first, all at once.
  flush() {
    const lines = this.buffer.splice(0).slice(-keep).reverse();
    this.list.prepend(...lines);
    while (this.list.childElementCount > keep) this.list.lastElementChild.remove();
  }

  matches(li) {
    const c = this.component.value;
    const o = this.object.value.trim();
    return (c === '' || li.dataset.component === c) && (o === '' || li.dataset.object.includes(o));
  }

  refilter() {
    for (const li of this.list.children) li.hidden = !this.matches(li);
  }
}

// clock shows an RFC 3339 time as the timeline does, 15:04:05.000 (Go
// drops a fraction's trailing zeros when it writes one).
function clock(t) {
  const m = /T(\d\d:\d\d:\d\d)(?:\.(\d+))?/.exec(t);
  return m ? `${m[1]}.${(m[2] ?? '').padEnd(3, '0').slice(0, 3)}` : t;
}

// kindOf guesses what kind of object a line is about from who decided:
// the timeline names objects, not kinds. The page looks the name up among
// what it watches when the guess finds nothing.
const kinds = {
  replicaset: 'ReplicaSet', deployment: 'Deployment', statefulset: 'StatefulSet', daemonset: 'DaemonSet',
  scheduler: 'Pod', kubelet: 'Pod', podgc: 'Pod', disruption: 'PodDisruptionBudget', job: 'Job',
  cronjob: 'CronJob', endpoint: 'Service', endpointslice: 'Service', namespace: 'Namespace', nodeipam: 'Node',
};

export function kindOf(e) {
  if (kinds[e.component]) return kinds[e.component];
  return e.object.includes('/') ? 'Pod' : 'Node';
}
