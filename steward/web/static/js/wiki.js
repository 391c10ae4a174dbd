// The Wiki section: the page tree, pages rendered with working wikilinks
// and backlinks, an editor whose save is refused when the file changed on
// disk, search, the ingest queue (live progress, cancel, retry), lint and a
// graph view. Everything goes through the host's /wiki/api/ routes
// (steward/wiki.APIHandler behind the host token).

import { h, clear, table, fmtTime } from './dom.js';
import { api } from './conn.js';
import { renderMarkdown } from './markdown.js';
import { drawGraph } from './wikigraph.js';

const API = '/wiki/api';
const TABS = [['pages', 'Pages'], ['search', 'Search'], ['queue', 'Ingest queue'], ['lint', 'Lint'], ['graph', 'Graph']];

export const pageHref = (path) => `#/wiki/${encodeURIComponent(path)}`;

// render shows #/wiki (the section's tabs) or #/wiki/<path> (one page).
export function render(app, arg) {
  const path = arg ? decodeURIComponent(arg) : '';
  const page = h('section', { class: 'page wiki-page', 'aria-labelledby': 'wiki-title' });
  if (path && !path.startsWith('~')) {
    showPage(app, page, path);
    return page;
  }
  const tab = path.slice(1) || sessionStorage.getItem('steward.wiki.tab') || 'pages';
  const body = h('div', { class: 'wiki-body', 'aria-live': 'polite' });
  const buttons = TABS.map(([id, label]) => h('a', { href: `#/wiki/~${id}`, class: 'button', role: 'tab',
    'aria-selected': String(id === tab), dataset: { tab: id } }, label));
  page.append(h('header', { class: 'view-header' }, h('h2', { id: 'wiki-title' }, 'Wiki'),
    h('nav', { class: 'segmented', role: 'tablist', 'aria-label': 'Wiki views' }, buttons)), body);
  sessionStorage.setItem('steward.wiki.tab', tab);
  ({ pages: showTree, search: showSearch, queue: showQueue, lint: showLint, graph: showGraph }[tab] || showTree)(app, body, page);
  return page;
}

function failed(el, what, err) {
  clear(el).append(h('p', { class: 'error', role: 'alert' }, `Could not load ${what}: ${err.message}`));
}

// --- page tree ------------------------------------------------------------

async function showTree(app, body, page) {
  try {
    const all = [];
    for (let offset = 0; ;) {
      const r = await api(`${API}/pages?limit=500&offset=${offset}`);
      all.push(...r.pages);
      if (!r.nextOffset) break;
      offset = r.nextOffset;
    }
    const root = { dirs: new Map(), pages: [] };
    for (const p of all) {
      const parts = p.path.split('/');
      let node = root;
      for (const d of parts.slice(0, -1)) {
        if (!node.dirs.has(d)) node.dirs.set(d, { dirs: new Map(), pages: [] });
        node = node.dirs.get(d);
      }
      node.pages.push(p);
    }
    const list = (node) => h('ul', { class: 'wiki-tree' },
      [...node.dirs.entries()].sort().map(([name, child]) => h('li', null,
        h('details', { open: node === root }, h('summary', null, name, h('span', { class: 'muted small' }, ` ${count(child)}`)), list(child)))),
      node.pages.map((p) => h('li', null, h('a', { href: pageHref(p.path), class: 'wiki-link' }, p.title),
        p.type ? h('span', { class: 'badge' }, p.type) : null)));
    clear(body).append(h('p', { class: 'muted' }, `${all.length} pages`), list(root));
    page.dataset.loaded = 'pages';
  } catch (err) {
    failed(body, 'the pages', err);
  }
}

function count(node) {
  let n = node.pages.length;
  for (const c of node.dirs.values()) n += count(c);
  return n;
}

// --- one page -------------------------------------------------------------

async function readAll(path) {
  let r = await api(`${API}/page?path=${encodeURIComponent(path)}`);
  let text = r.text;
  while (r.nextOffset) {
    const next = await api(`${API}/page?path=${encodeURIComponent(path)}&offset=${r.nextOffset}`);
    text += next.text;
    r = { ...r, nextOffset: next.nextOffset };
  }
  return { ...r, text };
}

// stripFrontmatter returns the body after a leading YAML header.
function stripFrontmatter(text) {
  const m = /^---\r?\n[\s\S]*?\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|$)/.exec(text);
  return m ? text.slice(m[0].length) : text;
}

// renderPage renders Markdown with [[wikilinks]] as links to the pages
// they resolve to (the host resolved them as Obsidian does); broken ones
// are marked. Links in code stay text.
export function renderPage(text, links) {
  const byRaw = new Map(links.map((l) => [l.raw, l]));
  const tokens = [];
  const marked = text.replace(/(!?)\[\[([^\]\n]+?)\]\]/g, (all, bang, raw) => {
    tokens.push({ all, raw, embed: !!bang });
    return `\uE000${tokens.length - 1}\uE001`;
  });
  const frag = renderMarkdown(marked);
  const walker = document.createTreeWalker(frag, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) if (walker.currentNode.nodeValue.includes('\uE000')) nodes.push(walker.currentNode);
  for (const node of nodes) {
    const inCode = node.parentElement?.closest('code, pre');
    const parts = node.nodeValue.split(/\uE000(\d+)\uE001/);
    const out = [];
    parts.forEach((s, i) => {
      if (i % 2 === 0) {
        if (s) out.push(document.createTextNode(s));
        return;
      }
      const t = tokens[Number(s)];
      if (inCode) {
        out.push(document.createTextNode(t.all));
        return;
      }
      const l = byRaw.get(t.raw);
      const alias = t.raw.includes('|') ? t.raw.slice(t.raw.indexOf('|') + 1) : t.raw;
      if (l && l.to && l.note) {
        out.push(h('a', { href: pageHref(l.to), class: ['wikilink', t.embed && 'embed', l.headingMissing && 'broken'],
          title: l.to + (l.heading ? ` › ${l.heading}` : ''), dataset: { to: l.to } }, alias));
      } else if (l && l.to) {
        out.push(h('span', { class: 'wikilink attachment', title: `Attachment ${l.to}` }, alias)); // not a page: shown, not opened
      } else {
        out.push(h('span', { class: 'wikilink broken', title: 'No page with this name' }, alias));
      }
    });
    node.replaceWith(...out);
  }
  return frag;
}

async function showPage(app, page, path) {
  page.setAttribute('aria-busy', 'true');
  const title = h('h2', { id: 'wiki-title' }, path);
  const actions = h('div', { class: 'actions' });
  const view = h('div', { class: 'wiki-view' });
  const side = h('aside', { class: 'wiki-side', 'aria-label': 'Links' });
  page.append(h('header', { class: 'view-header' }, h('a', { href: '#/wiki', class: 'button' }, '← Wiki'), title, actions),
    h('div', { class: 'wiki-layout' }, view, side));
  let r;
  try {
    r = await readAll(path);
  } catch (err) {
    failed(view, path, err);
    page.removeAttribute('aria-busy');
    return;
  }
  title.textContent = r.title || path;
  const fm = r.frontmatter || {};
  const meta = [['type', fm.type], ['sources', (fm.sources || []).join(', ')], ['updated', fm.updated], ['review by', fm.review_by],
    ['tags', (fm.tags || []).join(', ')]].filter(([, v]) => v);
  clear(view).append(h('div', null,
    r.warning ? h('p', { class: 'error', role: 'alert' }, r.warning) : null,
    meta.length ? h('dl', { class: 'wiki-meta' }, meta.flatMap(([k, v]) => [h('dt', null, k), h('dd', null, v)])) : null,
    h('article', { class: 'wiki-content markdown' }, renderPage(stripFrontmatter(r.text), r.links || []))));
  clear(side).append(h('h3', null, 'Backlinks'),
    r.backlinks.length ? h('ul', { class: 'backlinks' }, r.backlinks.map((b) => h('li', null, h('a', { href: pageHref(b.path) }, b.title))))
      : h('p', { class: 'muted small' }, 'No page links here.'),
    h('h3', null, 'Related'), h('div', { class: 'wiki-neighbours' }, h('p', { class: 'muted small' }, 'Loading…')));
  clear(actions).append(h('button', { type: 'button', 'on:click': () => edit(app, page, path, r, view) }, 'Edit'));
  page.dataset.hash = r.hash;
  page.removeAttribute('aria-busy');
  page.dataset.loaded = 'page';
  try {
    const g = await api(`${API}/graph?path=${encodeURIComponent(path)}&limit=12`);
    const box = side.querySelector('.wiki-neighbours');
    clear(box).append(g.neighbors.length ? drawGraph({ center: { path, title: r.title }, neighbors: g.neighbors, href: pageHref, size: 260 })
      : h('p', { class: 'muted small' }, 'No related pages.'));
  } catch { /* the page is shown; the graph is optional */ }
}

function edit(app, page, path, r, view) {
  const area = h('textarea', { id: 'wiki-editor', rows: 24, spellcheck: 'true', 'aria-label': `Text of ${path}` });
  area.value = r.text;
  const status = h('p', { class: 'wiki-edit-status', role: 'status' });
  const save = h('button', { type: 'button', class: 'primary', 'on:click': async () => {
    save.disabled = true;
    status.textContent = 'Saving…';
    status.className = 'wiki-edit-status';
    try {
      const res = await api(`${API}/page`, { method: 'PUT', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ path, content: area.value, baseHash: r.hash }) });
      page.dataset.saved = res.hash;
      app.route();
    } catch (err) {
      status.className = 'wiki-edit-status error';
      status.setAttribute('role', 'alert');
      status.textContent = err.status === 409
        ? 'This page changed on disk since you opened it, so it was not saved. Your text is still here: copy what you need, then reload the page to see the current version.'
        : `Not saved: ${err.message}`;
      page.dataset.conflict = err.status === 409 ? '1' : '';
      save.disabled = false;
    }
  } }, 'Save');
  clear(view).append(h('div', { class: 'wiki-editor' }, area, h('div', { class: 'actions' }, save,
    h('button', { type: 'button', 'on:click': () => app.route() }, 'Cancel'),
    h('button', { type: 'button', 'on:click': () => app.route() }, 'Reload')), status));
  area.focus();
}

// --- search ---------------------------------------------------------------

function showSearch(app, body, page) {
  const input = h('input', { type: 'search', id: 'wiki-search', placeholder: 'Search the wiki', 'aria-label': 'Search the wiki',
    value: sessionStorage.getItem('steward.wiki.q') || '' });
  const results = h('div', { class: 'wiki-results', 'aria-live': 'polite' });
  const run = async () => {
    const q = input.value.trim();
    sessionStorage.setItem('steward.wiki.q', q);
    if (!q) return;
    page.setAttribute('aria-busy', 'true');
    try {
      const r = await api(`${API}/search?q=${encodeURIComponent(q)}&limit=20`);
      clear(results).append(h('div', null,
        r.warning ? h('p', { class: 'muted small' }, r.warning) : null,
        r.results.length ? h('ol', { class: 'search-results' }, r.results.map((x) => h('li', null,
          h('a', { href: pageHref(x.path), class: 'wiki-link' }, x.title), ' ', h('span', { class: 'muted small' }, x.path),
          x.via ? h('span', { class: 'badge' }, 'related') : null,
          h('p', { class: 'small' }, x.snippet)))) : h('p', { class: 'muted' }, 'No results.')));
      page.dataset.searched = q;
    } catch (err) {
      failed(results, 'the results', err);
    }
    page.removeAttribute('aria-busy');
  };
  clear(body).append(h('form', { class: 'wiki-search', role: 'search', 'on:submit': (e) => { e.preventDefault(); run(); } },
    input, h('button', { type: 'submit', class: 'primary' }, 'Search')), results);
  input.focus();
  if (input.value) run();
}

// --- ingest queue -----------------------------------------------------------

function showQueue(app, body, page) {
  const list = h('div');
  clear(body).append(h('p', { class: 'muted small' }, 'Sources added with `steward wiki add` (or dropped into raw/sources/) are ingested one at a time: ' +
    'the model reads each and writes or updates pages. Failed tasks are retried three times.'), list);
  const draw = (snap) => {
    const c = snap.counts;
    clear(list).append(h('p', null, `${c.queued} queued, ${c.running} running, ${c.done} done, ${c.failed} failed`),
      table('Ingest tasks', [
        { label: 'Source', get: (t) => t.source },
        { label: 'State', get: (t) => h('span', { class: ['badge', t.status], dataset: { state: t.status } }, t.status) },
        { label: 'Progress', get: (t) => t.error || t.progress || '' },
        { label: 'Updated', get: (t) => fmtTime(t.updated) },
        { label: '', get: (t) => (t.status === 'queued' || t.status === 'running')
          ? h('button', { type: 'button', 'on:click': () => act(t.id, 'cancel') }, 'Cancel')
          : (t.status === 'failed' || t.status === 'cancelled') ? h('button', { type: 'button', 'on:click': () => act(t.id, 'retry') }, 'Retry') : '' },
      ], snap.tasks, 'Nothing queued.'));
    page.dataset.loaded = 'queue';
  };
  const act = async (id, op) => {
    try {
      await api(`${API}/queue/${id}/${op}`, { method: 'POST' });
      draw(await api(`${API}/queue`));
    } catch (err) {
      app.toast(`Could not ${op}: ${err.message}`);
    }
  };
  // Live progress: the API streams server-sent events; fetch carries the
  // token in a header (EventSource cannot).
  const ctrl = new AbortController();
  (async () => {
    try {
      draw(await api(`${API}/queue`));
      const res = await api(`${API}/events`, { raw: true, signal: ctrl.signal });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done || !page.isConnected) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = ev.split('\n').find((l) => l.startsWith('data: '));
          if (data) draw(JSON.parse(data.slice(6)));
        }
      }
    } catch (err) {
      if (err.name !== 'AbortError' && page.isConnected) failed(list, 'the queue', err);
    }
  })();
  addEventListener('hashchange', () => ctrl.abort(), { once: true });
}

// --- lint -------------------------------------------------------------------

async function showLint(app, body, page) {
  try {
    const r = await api(`${API}/lint`);
    clear(body).append(h('p', null, `${r.pages} pages, ${r.issues.length} issues`),
      table('Lint issues', [
        { label: 'Page', get: (i) => h('a', { href: pageHref(i.path) }, i.path + (i.line ? `:${i.line}` : '')) },
        { label: 'Kind', get: (i) => h('span', { class: 'badge' }, i.kind.replace(/_/g, ' ')) },
        { label: 'Problem', get: (i) => i.message },
      ], r.issues, 'No issues: every link resolves and every page has its sources.'));
    page.dataset.loaded = 'lint';
  } catch (err) {
    failed(body, 'lint', err);
  }
}

// --- graph ------------------------------------------------------------------

async function showGraph(app, body, page) {
  try {
    const g = await api(`${API}/graph/full`);
    const summary = h('p', null, `${g.nodes.length} pages, ${g.edges.length} links, ${g.communities.length} communities (modularity ${g.modularity})`);
    const ins = g.insights;
    clear(body).append(summary, drawGraph({ nodes: g.nodes, edges: g.edges, href: pageHref, size: 640 }),
      h('h3', null, 'Insights'),
      h('ul', null,
        h('li', null, `Isolated pages: ${(ins.isolated || []).length}`),
        h('li', null, `Sparse communities: ${(ins.sparseCommunities || []).length}`),
        h('li', null, 'Bridge pages: ', ...(ins.bridges || []).slice(0, 12).flatMap((p, i) => [i ? ', ' : '', h('a', { href: pageHref(p) }, p)]))));
    page.dataset.loaded = 'graph';
  } catch (err) {
    failed(body, 'the graph', err);
  }
}
