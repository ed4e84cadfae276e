// toYAML writes a JSON value as YAML, the way kubectl get -o yaml shows
// an object: block mappings and sequences, strings quoted only when a
// plain scalar would read as something else.
export function toYAML(value) {
  return lines(value, 0).join('\n') + '\n';
}

function lines(v, indent) {
  const pad = ' '.repeat(indent);
  if (Array.isArray(v)) {
    if (v.length === 0) return [pad + '[]'];
    const out = [];
    for (const item of v) {
      if (isBlock(item)) {
        const sub = lines(item, indent + 2);
        out.push(pad + '- ' + sub[0].slice(indent + 2), ...sub.slice(1));
      } else {
        out.push(pad + '- ' + scalar(item));
      }
    }
    return out;
  }
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v);
    if (keys.length === 0) return [pad + '{}'];
    const out = [];
    for (const k of keys) {
      const item = v[k];
      if (isBlock(item)) {
        out.push(`${pad}${scalar(k)}:`, ...lines(item, Array.isArray(item) ? indent : indent + 2));
      } else {
        out.push(`${pad}${scalar(k)}: ${scalar(item)}`);
      }
    }
    return out;
  }
  return [pad + scalar(v)];
}

function isBlock(v) {
  return v !== null && typeof v === 'object' && Object.keys(v).length > 0;
}

function scalar(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return '[]';
  if (typeof v === 'object') return '{}';
  if (typeof v !== 'string') return String(v);
  if (v === '' || /^[\s\-?:,[\]{}#&*!|>'"%@`]|[:#]\s|\s$|^(true|false|null|yes|no|on|off|~)$|^[-+.0-9]/i.test(v) || v.includes('\n')) {
    return JSON.stringify(v);
  }
  return v;
}
