// DOM building without HTML strings: every piece of text becomes a text node,
// so nothing from the host, the model, mail or tools is ever parsed as markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

// Attributes that could run code or navigate are refused outright; links set
// href through safeHref only.
const FORBIDDEN_ATTR = /^(on|srcdoc$|formaction$|style$)/i;

function applyAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on:')) el.addEventListener(k.slice(3), v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'value' || k === 'checked') el[k] = v;
    else if (k === 'href' && el.namespaceURI !== SVG_NS) {
      const safe = safeHref(v);
      if (safe) el.setAttribute('href', safe);
    } else if (FORBIDDEN_ATTR.test(k)) throw new Error(`refusing attribute ${k}`);
    else if (k in el && typeof v !== 'string' && el.namespaceURI !== SVG_NS) el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// h builds an element: h('p', {class: 'x'}, 'text', child, [more]).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  applyAttrs(el, attrs);
  append(el, children);
  return el;
}

// svg builds an SVG element the same way.
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  applyAttrs(el, attrs);
  append(el, children);
  return el;
}

// safeHref returns an absolute http(s), mailto, tel or message (a mail
// client's message link) URL, or the app's own hash routes, and null for
// anything else (javascript:, data:, relative tricks).
const SAFE_PROTOCOLS = new Set(['http:', 'https:', 'mailto:', 'tel:', 'message:']);
export function safeHref(url) {
  if (typeof url !== 'string') return null;
  if (/^#\/[\w/.%~-]*$/.test(url)) return url;
  try {
    const u = new URL(url);
    if (SAFE_PROTOCOLS.has(u.protocol)) return u.href;
  } catch { /* not a URL */ }
  return null;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

export function fmtBytes(n) {
  if (!Number.isFinite(n)) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function fmtMs(ms) {
  if (!Number.isFinite(ms)) return '';
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

// fmtUSD writes dollars one way everywhere: cents ($0.00, $1,234.50), and
// an amount under a cent with two significant digits ($0.0012), so small
// model costs do not all read $0.00.
export function fmtUSD(x) {
  if (!Number.isFinite(x)) return '';
  const abs = Math.abs(x);
  const sign = x < 0 ? '-' : '';
  if (abs === 0 || abs >= 0.01) return `${sign}$${abs.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  return `${sign}$${abs.toPrecision(2).replace(/0+$/, '')}`;
}

export function fmtInt(n) {
  return Number.isFinite(n) ? n.toLocaleString('en-US') : '';
}

export function fmtTime(t) {
  if (!t) return '';
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function json(v) {
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

// table builds an accessible table from column specs {label, get, num}.
export function table(caption, cols, rows, empty = 'Nothing yet.') {
  if (!rows || rows.length === 0) return h('p', { class: 'muted' }, empty);
  return h('div', { class: 'table-wrap' },
    h('table', null,
      h('caption', null, caption),
      h('thead', null, h('tr', null, cols.map((c) => h('th', { scope: 'col', class: c.num ? 'num' : null }, c.label)))),
      h('tbody', null, rows.map((r) => h('tr', null, cols.map((c) => h('td', { class: c.num ? 'num' : null }, c.get(r))))))));
}

// Line icons drawn in a 24×24 box with the current text colour; emoji are
// not used because many systems (and headless browsers) lack the font.
const ICONS = {
  clip: 'M8 12.5l6.4-6.4a3 3 0 0 1 4.2 4.2l-8 8a5 5 0 0 1-7.1-7.1l7.3-7.3',
  mic: 'M9 5a3 3 0 0 1 6 0v6a3 3 0 0 1-6 0z M5.5 11a6.5 6.5 0 0 0 13 0 M12 17.5V21 M8.5 21h7',
  check: 'M5 12.5l4.5 4.5L19 7',
  alert: 'M12 3.5l9.5 16.5h-19z M12 10v4.5 M12 17.5v.5',
  clock: 'M3 12a9 9 0 1 0 18 0a9 9 0 1 0-18 0 M12 7v5l3 2',
  shield: 'M12 3l8 3v6c0 5-3.5 8-8 9c-4.5-1-8-4-8-9V6z M8.5 12l2.5 2.5 4.5-4.5',
  mail: 'M3 6h18v12H3z M3 6.5l9 6.5 9-6.5',
  file: 'M6 3h8l4 4v14H6z M14 3v4h4',
  calendar: 'M4 6h16v14H4z M4 10h16 M8 3v5 M16 3v5',
  image: 'M4 5h16v14H4z M4 16l5-5 4 4 3-3 4 4',
  question: 'M3 12a9 9 0 1 0 18 0a9 9 0 1 0-18 0 M9.5 9.5a2.5 2.5 0 1 1 3.6 2.2c-.7.4-1.1.9-1.1 1.6v.7 M12 17v.5',
  stop: 'M7 7h10v10H7z',
  search: 'M4 10.5a6.5 6.5 0 1 0 13 0a6.5 6.5 0 1 0-13 0 M15.5 15.5L20 20',
  user: 'M8 8a4 4 0 1 0 8 0a4 4 0 1 0-8 0 M4 20c0-4 4-6 8-6s8 2 8 6',
  train: 'M6 4h12v11H6z M6 10h12 M8 19l-2 2 M16 19l2 2 M9 13v.5 M15 13v.5',
};

export function icon(name, label) {
  return svg('svg', { class: `icon icon-${name}`, viewBox: '0 0 24 24', width: 16, height: 16, 'aria-hidden': label ? null : 'true',
    role: label ? 'img' : null, 'aria-label': label || null },
  svg('path', { d: ICONS[name] || ICONS.question }));
}
