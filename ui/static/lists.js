// The page's first two lists, sent as soon as the page is read, while the
// style sheet and the modules are still on their way: of all the page
// waits for, the pods list takes longest. api.js's informers take these
// answers for their first list instead of sending their own, but only
// for a request exactly as they would send it (the same URL and Accept);
// any other is sent anew. A classic script, read before the style sheet
// (index.html), so that it runs on arrival, not after the style sheet and
// the module graph.
'use strict';
performance.mark('ui:lists-sent');
window.firstLists = new Map();
for (const [path, accept] of [
  ['/api/v1/nodes?limit=500&resourceVersion=0', ''],
  ['/api/v1/pods?limit=500&resourceVersion=0', 'application/json;as=Table;v=v1;g=meta.k8s.io, application/json'],
]) {
  window.firstLists.set(`${accept} ${path}`, fetch(path, { headers: accept ? { Accept: accept } : {} }));
}
