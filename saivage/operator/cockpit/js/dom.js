// DOM helpers. Everything is built from nodes and text nodes: no HTML
// string from the server or a model ever reaches innerHTML.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function fmtTime(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? String(ts) : d.toLocaleString();
}

export function badge(status) {
  return h('span', { class: `badge status-${status}` }, status);
}

// json renders a value as indented JSON text (lossless, never HTML).
export function json(value) {
  let text;
  try { text = JSON.stringify(value, null, 2); } catch { text = String(value); }
  return h('pre', { class: 'json' }, text === undefined ? 'undefined' : text);
}

// jsonText pretty-prints a JSON string when it parses, else shows it as is.
export function jsonText(s) {
  if (typeof s !== 'string') return json(s);
  try { return json(JSON.parse(s)); } catch { return h('pre', {}, s); }
}

// failure shows a refresh failure next to the last good data, with Retry.
export function failure(error, retry) {
  return h('div', { class: 'failure', role: 'alert' },
    h('span', {}, `Could not refresh: ${error.message}`),
    retry ? h('button', { type: 'button', onclick: retry }, 'Retry') : null);
}

// markdown renders a safe subset (paragraphs, headings, lists, code
// fences, inline code, emphasis, http(s) links) as DOM nodes.
export function markdown(src) {
  const root = h('div', { class: 'md' });
  const lines = String(src || '').replace(/\r\n/g, '\n').split('\n');
  let i = 0;
  let list = null;
  let para = [];
  const flush = () => {
    if (para.length) root.append(h('p', {}, inline(para.join(' '))));
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^```/);
    if (fence) {
      flush(); list = null;
      const code = [];
      i++;
      while (i < lines.length && !/^```/.test(lines[i])) code.push(lines[i++]);
      root.append(h('pre', {}, h('code', {}, code.join('\n'))));
      i++;
      continue;
    }
    const head = line.match(/^(#{1,4})\s+(.*)$/);
    const item = line.match(/^\s*(?:[-*]|\d+\.)\s+(.*)$/);
    if (head) {
      flush(); list = null;
      root.append(h(`h${Math.min(head[1].length + 2, 6)}`, {}, inline(head[2])));
    } else if (item) {
      flush();
      if (!list) { list = h('ul'); root.append(list); }
      list.append(h('li', {}, inline(item[1])));
    } else if (line.trim() === '') {
      flush(); list = null;
    } else {
      list = null;
      para.push(line);
    }
    i++;
  }
  flush();
  return root;
}

function inline(text) {
  const out = [];
  const re = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*]+\*)|(\[[^\]]+\]\((https?:\/\/[^\s)]+)\))/g;
  let last = 0;
  let m;
  while ((m = re.exec(text))) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1]) out.push(h('code', {}, m[1].slice(1, -1)));
    else if (m[2]) out.push(h('strong', {}, m[2].slice(2, -2)));
    else if (m[3]) out.push(h('em', {}, m[3].slice(1, -1)));
    else if (m[4]) out.push(h('a', { href: m[5], rel: 'noopener noreferrer', target: '_blank' }, m[4].slice(1, m[4].indexOf(']'))));
    last = re.lastIndex;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
