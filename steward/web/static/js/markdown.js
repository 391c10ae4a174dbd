// A Markdown renderer that is safe by construction: it builds DOM nodes and
// sets text through text nodes only, so HTML in the model's, a mail's or a
// tool's text is shown as the characters it is and never parsed. Links keep
// only http(s) and mailto targets and open in a new tab with rel=noopener;
// images are shown as links, never loaded (a remote image would leak that the
// message was read, and could carry data out in its URL).
//
// It is re-run on the whole text for each streamed delta, so an unfinished
// construct (an open code fence) simply renders as far as it has arrived.

import { h, safeHref, icon } from './dom.js';

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const BULLET = /^(\s*)([-*+])\s+(.*)$/;
const ORDERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

// renderMarkdown returns a DocumentFragment for text.
export function renderMarkdown(text) {
  const frag = document.createDocumentFragment();
  const lines = String(text ?? '').replace(/\r\n?/g, '\n').split('\n');
  renderBlocks(lines, frag);
  return frag;
}

function renderBlocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (/^\s*$/.test(line)) {
      i++;
      continue;
    }
    let m;
    if ((m = FENCE.exec(line))) {
      const close = m[1][0].repeat(m[1].length);
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(close)) body.push(lines[i++]);
      i++; // the closing fence, or past the end while streaming
      const code = h('code', m[2] ? { class: `lang-${m[2]}` } : null, body.join('\n'));
      parent.append(h('pre', null, code));
      continue;
    }
    if ((m = HEADING.exec(line))) {
      parent.append(h(`h${Math.min(m[1].length + 2, 6)}`, null, inline(m[2])));
      i++;
      continue;
    }
    if (RULE.test(line)) {
      parent.append(h('hr'));
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        inner.push(m[1]);
        i++;
      }
      const bq = h('blockquote');
      renderBlocks(inner, bq);
      parent.append(bq);
      continue;
    }
    if (BULLET.test(line) || ORDERED.test(line)) {
      i = renderList(lines, i, parent);
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      i = renderTable(lines, i, parent);
      continue;
    }
    const para = [];
    while (i < lines.length && !/^\s*$/.test(lines[i]) && !startsBlock(lines[i])) para.push(lines[i++]);
    if (para.length === 0) para.push(lines[i++]);
    const p = h('p');
    para.forEach((l, k) => {
      if (k > 0) p.append(h('br'));
      p.append(inline(l.trim()));
    });
    parent.append(p);
  }
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || BULLET.test(line) || ORDERED.test(line);
}

function renderList(lines, i, parent) {
  const first = BULLET.exec(lines[i]) || ORDERED.exec(lines[i]);
  const ordered = !BULLET.test(lines[i]);
  const indent = first[1].length;
  const list = h(ordered ? 'ol' : 'ul');
  if (ordered && first[2] !== '1') list.setAttribute('start', String(parseInt(first[2], 10)));
  while (i < lines.length) {
    const m = (ordered ? ORDERED : BULLET).exec(lines[i]);
    if (!m || m[1].length !== indent) break;
    const body = [m[3]];
    i++;
    // Continuation and nested lines are indented deeper than the marker.
    while (i < lines.length && !/^\s*$/.test(lines[i]) && lines[i].search(/\S/) > indent) body.push(lines[i++].slice(indent + 2));
    const li = h('li');
    if (body.length === 1) li.append(inline(body[0]));
    else renderBlocks(body, li);
    list.append(li);
    if (i < lines.length && /^\s*$/.test(lines[i]) && i + 1 < lines.length && (ordered ? ORDERED : BULLET).test(lines[i + 1])) i++;
  }
  parent.append(list);
  return i;
}

function cells(line) {
  return line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
}

function renderTable(lines, i, parent) {
  const head = cells(lines[i]);
  i += 2;
  const rows = [];
  while (i < lines.length && lines[i].includes('|') && !/^\s*$/.test(lines[i])) rows.push(cells(lines[i++]));
  parent.append(h('div', { class: 'table-wrap' }, h('table', null,
    h('thead', null, h('tr', null, head.map((c) => h('th', { scope: 'col' }, inline(c))))),
    h('tbody', null, rows.map((r) => h('tr', null, head.map((_, k) => h('td', null, inline(r[k] ?? '')))))))));
  return i;
}

// Inline tokens, earliest match wins: code, image, link, autolink, bold,
// strike, italic. Spans are bounded (a label or emphasis of at most 1,000
// characters, no "[" inside a label) so that unclosed markers cost linear
// time, not quadratic: a hostile answer cannot freeze the page.
const INLINE = new RegExp([
  /(`+)([^`]|[^`][\s\S]{0,1000}?[^`])\1(?!`)/.source, // 1,2 code
  /!\[([^[\]]{0,1000})\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/.source, // 3,4 image
  /\[((?:[^[\]\\]|\\.){1,1000})\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/.source, // 5,6 link
  /<?((?:https?:\/\/|mailto:)[^\s<>]*[^\s<>.,:;"')\]])>?/.source, // 7 autolink
  /\*\*(?=\S)([\s\S]{0,1000}?\S)\*\*|(?<!\w)__(?=\S)([\s\S]{0,1000}?\S)__(?!\w)/.source, // 8,9 bold
  /~~(?=\S)([\s\S]{0,1000}?\S)~~/.source, // 10 strike
  /\*(?=[^\s*])([\s\S]{0,1000}?[^\s*])\*|(?<![\w])_(?=\S)([\s\S]{0,1000}?\S)_(?![\w])/.source, // 11,12 italic
].join('|'), 'g');

function link(label, url) {
  const href = safeHref(url);
  if (!href) return document.createTextNode(label === url ? label : `${label} (${url})`);
  if (href.startsWith('#/')) return h('a', { href }, label); // the app's own page, e.g. a cited wiki page
  return h('a', { href, target: '_blank', rel: 'noopener noreferrer' }, label);
}

export function inline(text) {
  const frag = document.createDocumentFragment();
  let last = 0;
  let m;
  const src = String(text);
  const re = new RegExp(INLINE); // its own lastIndex: inline() recurses
  while ((m = re.exec(src))) {
    if (m.index > last) frag.append(unescape(src.slice(last, m.index)));
    if (m[2] !== undefined) frag.append(h('code', null, m[2].replace(/^ (.*) $/, '$1')));
    else if (m[4] !== undefined) {
      // An image is offered as a link, never loaded.
      const a = link(m[3] || 'image', m[4]);
      if (a.nodeType === Node.ELEMENT_NODE) a.prepend(icon('image'), ' ');
      frag.append(a);
    }
    else if (m[6] !== undefined) {
      const a = link('', m[6]);
      if (a.nodeType === Node.ELEMENT_NODE) {
        a.append(inline(m[5]));
        frag.append(a);
      } else frag.append(`${unescape(m[5])} (${m[6]})`);
    } else if (m[7] !== undefined) frag.append(link(m[7], m[7]));
    else if (m[8] !== undefined || m[9] !== undefined) frag.append(h('strong', null, inline(m[8] ?? m[9])));
    else if (m[10] !== undefined) frag.append(h('del', null, inline(m[10])));
    else frag.append(h('em', null, inline(m[11] ?? m[12])));
    last = re.lastIndex;
  }
  if (last < src.length) frag.append(unescape(src.slice(last)));
  return frag;
}

function unescape(s) {
  return s.replace(/\\([\\`*_{}[\]()#+\-.!~|>])/g, '$1');
}
