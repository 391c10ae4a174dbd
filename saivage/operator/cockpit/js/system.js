// Files, System and Debug.
import { call, owner } from './api.js';
import { h, clear, fmtTime, failure, json } from './dom.js';

// LISTING_AGE is how long an accepted listing counts as fresh.
const LISTING_AGE = 30_000;
const IMAGE = /\.(png|jpe?g|gif|webp)$/i;

// filesView owns one listing and one preview; each aborts its own stale
// requests. A listing older than 30 s is refetched when the page regains
// focus; the preview is not.
export function filesView(ctx, path) {
  const crumb = h('nav', { class: 'crumbs', 'aria-label': 'Folder' });
  const table = h('tbody');
  const age = h('span', { class: 'muted small' });
  const preview = h('div', { class: 'file-preview', 'aria-live': 'polite' });
  const listReq = owner();
  const prevReq = owner();
  let listedAt = 0;
  let objectURL = null;
  const parts = path && !path.startsWith('record:') ? path.split('/') : [];
  clear(crumb, h('a', { href: '#/files' }, 'project'), parts.map((p, i) => [' / ',
    h('a', { href: `#/files?path=${encodeURIComponent(parts.slice(0, i + 1).join('/'))}` }, p)]), path.startsWith('record:') ? ` / ${path}` : '');
  const open = async (e) => {
    if (objectURL) { URL.revokeObjectURL(objectURL); objectURL = null; }
    clear(preview, h('p', { class: 'muted' }, `Loading ${e.path}…`));
    const image = IMAGE.test(e.name);
    const r = await prevReq.run(async (signal) => (image
      ? call('files.image', { query: { path: e.path }, signal, raw: true }).then((res) => res.blob())
      : call('files.content', { query: { path: e.path }, signal })));
    if (!r.current) return;
    if (r.error) { clear(preview, h('p', { class: 'error', dataset: { code: r.error.code } }, `${e.path}: ${r.error.message}`)); return; }
    if (image) {
      objectURL = URL.createObjectURL(r.value);
      clear(preview, h('h3', {}, e.path), h('img', { src: objectURL, alt: e.path, class: 'preview-img' }));
    } else {
      const t = r.value;
      clear(preview, h('h3', {}, e.path),
        h('p', { class: 'muted small' }, `${t.bytes} bytes${t.bom ? ' · BOM' : ''}${t.crlf ? ' · CRLF' : ''}${t.redacted ? ' · secrets redacted' : ''}`),
        h('pre', { class: 'file-text' }, t.text));
    }
  };
  const load = async () => {
    const r = await listReq.run((signal) => call('files.list', { query: { path }, signal }));
    if (!r.current) return;
    if (r.error) { clear(table, h('tr', {}, h('td', { colspan: 3 }, h('p', { class: 'error', dataset: { code: r.error.code } }, r.error.message), h('button', { type: 'button', onclick: load }, 'Retry')))); return; }
    listedAt = Date.now();
    age.textContent = `listed ${fmtTime(r.value.listed_at)}${r.value.hidden ? ` · ${r.value.hidden} private entr${r.value.hidden === 1 ? 'y' : 'ies'} not shown` : ''}`;
    clear(table, r.value.entries.map((e) => h('tr', { dataset: { path: e.path } },
      h('td', {}, e.kind === 'dir'
        ? h('a', { href: `#/files?path=${encodeURIComponent(e.path)}` }, `${e.name}/`)
        : h('button', { type: 'button', class: 'link', onclick: () => open(e) }, e.name)),
      h('td', { class: 'small muted' }, e.kind === 'dir' ? '' : `${e.size} B`),
      h('td', { class: 'small muted' }, fmtTime(e.modified)))));
  };
  const onFocus = () => { if (Date.now() - listedAt > LISTING_AGE) load(); };
  window.addEventListener('focus', onFocus);
  const offRe = ctx.live.onReconnect(() => { if (Date.now() - listedAt > LISTING_AGE) load(); });
  const pick = h('form', { class: 'row', onsubmit: (ev) => {
    ev.preventDefault();
    const v = ev.target.elements.p.value.trim();
    if (v) open({ path: v, name: v });
  } }, h('input', { name: 'p', type: 'text', placeholder: 'path or record:CARD/NAME', 'aria-label': 'Open a path' }), h('button', { type: 'submit' }, 'Open'));
  load();
  return {
    el: h('div', { class: 'files-view' }, h('h1', {}, 'Files'), crumb, h('div', { class: 'row' }, age, h('button', { type: 'button', onclick: load }, 'Refresh')), pick,
      h('div', { class: 'two' }, h('table', { class: 'grid' }, table), preview)),
    title: 'Files',
    destroy() { listReq.abort(); prevReq.abort(); window.removeEventListener('focus', onFocus); offRe(); if (objectURL) URL.revokeObjectURL(objectURL); },
  };
}

const SECTIONS = [
  ['events', 'Events'], ['errors', 'Errors'], ['doctor', 'Doctor'], ['mcp', 'MCP servers'], ['processes', 'Processes'],
  ['providers', 'Providers'], ['actions', 'Control actions'], ['external', 'External calls'], ['config', 'Config'],
];

function eventsSection(ctx) {
  const list = h('tbody');
  const info = h('span', { class: 'small muted' });
  const type = h('input', { type: 'text', placeholder: 'type filter', 'aria-label': 'Event type' });
  const req = owner();
  const limit = 50;
  let offset = null;
  let total = 0;
  const load = async (off) => {
    const r = await req.run(async (signal) => {
      let o = off;
      if (o === null) o = Math.max((await call('events.list', { query: { limit: 1, type: type.value.trim() }, signal })).total - limit, 0);
      return call('events.list', { query: { offset: o, limit, type: type.value.trim() }, signal });
    });
    if (!r.current) return;
    if (r.error) { info.replaceChildren(failure(r.error, () => load(offset))); return; }
    offset = r.value.offset;
    total = r.value.total;
    info.textContent = `${total ? offset + 1 : 0}–${offset + r.value.events.length} of ${total}`;
    clear(list, r.value.events.map((e) => h('tr', {}, h('td', { class: 'mono small' }, fmtTime(e.ts)), h('td', {}, e.type), h('td', {}, json(e.data || {})))));
  };
  load(null);
  return {
    el: h('div', {}, h('div', { class: 'row' }, type,
      h('button', { type: 'button', onclick: () => load(null) }, 'Refresh'),
      h('button', { type: 'button', onclick: () => load(Math.max(offset - limit, 0)) }, 'Earlier'),
      h('button', { type: 'button', onclick: () => load(Math.min(offset + limit, Math.max(total - 1, 0))) }, 'Later'), info),
    h('table', { class: 'grid' }, list)),
    destroy: () => req.abort(),
  };
}

function simpleSection(op, render, query) {
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const req = owner();
  const load = async () => {
    const r = await req.run((signal) => call(op, { signal, query }));
    if (!r.current) return;
    if (r.error) { body.prepend(failure(r.error, load)); return; }
    clear(body, h('button', { type: 'button', onclick: load }, 'Refresh'), render(r.value, load));
  };
  load();
  return { el: body, destroy: () => req.abort() };
}

function mcpRender(v, reload) {
  const msg = h('p', { role: 'status', class: 'small' });
  const act = (name, op) => async () => {
    msg.textContent = `${op} ${name}…`;
    try {
      const r = await call(`mcp.${op}`, { params: { name } });
      msg.textContent = `${name}: ${r.server.state}`;
    } catch (e) {
      msg.textContent = `${op} ${name} failed: ${e.message}`;
    }
    reload();
  };
  return [msg, v.servers.length ? h('table', { class: 'grid' }, h('tbody', {}, v.servers.map((s) => h('tr', { dataset: { server: s.name } },
    h('td', {}, h('strong', {}, s.name), h('div', { class: 'small muted' }, `${s.transport}${s.autostart ? ' · autostart' : ''}`)),
    h('td', {}, s.state, s.last_error ? h('div', { class: 'small error' }, s.last_error) : null),
    h('td', { class: 'small' }, s.tools.map((t) => t.name).join(', ') || '—'),
    h('td', {}, ['start', 'stop', 'restart'].map((op) => h('button', { type: 'button', onclick: act(s.name, op) }, op))))))) : h('p', { class: 'muted' }, 'No MCP servers are configured.')];
}

function doctorSection() {
  const out = h('div');
  const req = owner();
  const run = async () => {
    clear(out, h('p', { class: 'muted' }, 'Running…'));
    const r = await req.run((signal) => call('debug.doctor', { signal }));
    if (!r.current) return;
    if (r.error) { clear(out, failure(r.error, run)); return; }
    const d = r.value;
    clear(out, h('p', { class: d.ok ? 'ok' : 'error' }, d.ok ? `Healthy: ${d.cards_checked} card(s) read.` : `${d.problems.length} problem(s) in ${d.cards_checked} card(s).`),
      d.problems.length ? h('ul', {}, d.problems.map((p) => h('li', {}, `${p.card}${p.record ? `/${p.record}` : ''}: ${p.error}`))) : null, json(d.statuses));
  };
  return { el: h('div', {}, h('button', { type: 'button', class: 'primary', onclick: run }, 'Run doctor'), out), destroy: () => req.abort() };
}

// systemView owns its sections; only the selected section does work.
export function systemView(ctx, section) {
  const tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'System sections' });
  const body = h('div', { role: 'tabpanel' });
  let active = null;
  const show = (s) => {
    active?.destroy();
    section = s;
    clear(tabs, SECTIONS.map(([k, label]) => h('a', { role: 'tab', href: `#/system/${k}`, 'aria-selected': String(k === s), dataset: { section: k } }, label)));
    switch (s) {
      case 'errors': active = simpleSection('debug.errors', (v) => [
        v.runtime_error ? h('p', { class: 'error' }, `Runtime error: ${v.runtime_error}`) : null,
        v.mcp_failures.map((f) => h('p', { class: 'error' }, `MCP ${f.server}: ${f.error}`)),
        v.events.length ? h('table', { class: 'grid' }, h('tbody', {}, v.events.map((e) => h('tr', {}, h('td', { class: 'mono small' }, fmtTime(e.ts)), h('td', {}, e.type), h('td', {}, json(e.data || {})))))) : h('p', { class: 'muted' }, 'No errors recorded.')]); break;
      case 'doctor': active = doctorSection(); break;
      case 'mcp': active = simpleSection('mcp.tools', mcpRender); break;
      case 'processes': active = simpleSection('processes.list', (v) => (v.processes.length ? h('table', { class: 'grid' }, h('tbody', {}, v.processes.map((p) => h('tr', {}, h('td', { class: 'mono small' }, p.id), h('td', {}, p.scope), h('td', { class: 'mono small' }, p.command), h('td', {}, p.state, p.exit_code !== undefined ? ` (${p.exit_code})` : ''))))) : h('p', { class: 'muted' }, 'No managed processes.'))); break;
      case 'providers': active = simpleSection('providers.list', (v) => [h('h3', {}, 'Routes'), h('table', { class: 'grid' }, h('tbody', {}, v.routes.map((r) => h('tr', {}, h('td', {}, r.name), h('td', {}, r.public), h('td', { class: 'small' }, r.candidates.join(', ')), h('td', { class: 'small' }, r.usable_input_tokens ? `${r.usable_input_tokens} input tokens` : ''))))), h('h3', {}, 'Providers'), json(v.providers)]); break;
      case 'actions': active = simpleSection('controlActions.list', (v) => json(v.actions)); break;
      case 'external': active = simpleSection('externalToolCalls.list', (v) => (v.calls.length ? json(v.calls) : h('p', { class: 'muted' }, 'No external tool calls recorded.'))); break;
      case 'config': active = simpleSection('config.get', (v) => [h('p', { class: 'muted small' }, 'Effective configuration, redacted. Changes need a restart.'), json(v.config)]); break;
      default: active = eventsSection(ctx);
    }
    clear(body, active.el);
  };
  show(section);
  return {
    el: h('div', { class: 'system-view' }, h('h1', {}, 'System'), tabs, body),
    title: 'System',
    update(parts) { show(parts[1] || 'events'); },
    destroy() { active?.destroy(); },
  };
}

const SVG = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...kids) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  kids.forEach((k) => el.append(k instanceof Node ? k : document.createTextNode(String(k))));
  return el;
}

// graphSVG lays a compiled state table out in columns by distance from
// the ready state and draws each transition as an arrow.
export function graphSVG(g) {
  const depth = new Map([[g.states[0]?.id, 0]]);
  const queue = [g.states[0]?.id];
  while (queue.length) {
    const id = queue.shift();
    for (const e of g.edges.filter((x) => x.from === id)) {
      if (!depth.has(e.to)) { depth.set(e.to, depth.get(id) + 1); queue.push(e.to); }
    }
  }
  let maxCol = 0;
  g.states.forEach((st) => { if (!depth.has(st.id)) depth.set(st.id, 0); maxCol = Math.max(maxCol, depth.get(st.id)); });
  const cols = [];
  g.states.forEach((st) => { const d = depth.get(st.id); (cols[d] ||= []).push(st); });
  const W = 150; const H = 54; const BW = 124; const BH = 30;
  const pos = new Map();
  cols.forEach((col, c) => col.forEach((st, r) => pos.set(st.id, { x: 12 + c * W, y: 12 + r * H })));
  const rows = Math.max(...cols.map((c) => c.length));
  const svg = s('svg', { viewBox: `0 0 ${24 + (maxCol + 1) * W} ${24 + rows * H}`, class: 'graph', role: 'img', 'aria-label': `Workflow of ${g.card_type}` });
  svg.append(s('defs', {}, s('marker', { id: `arrow-${g.card_type}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse' }, s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))));
  for (const e of g.edges) {
    const a = pos.get(e.from); const b = pos.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + BW; const y1 = a.y + BH / 2; const x2 = b.x; const y2 = b.y + BH / 2;
    const back = x2 <= x1;
    const d = back ? `M${a.x + BW / 2},${a.y + BH} C${a.x + BW / 2},${a.y + BH + 24} ${b.x + BW / 2},${b.y + BH + 24} ${b.x + BW / 2},${b.y + BH}` : `M${x1},${y1} C${x1 + 20},${y1} ${x2 - 20},${y2} ${x2},${y2}`;
    svg.append(s('path', { d, class: `edge edge-${e.variant}`, 'marker-end': `url(#arrow-${g.card_type})` }, s('title', {}, `${e.from} → ${e.to} (${e.variant}${e.outcome ? `: ${e.outcome}` : ''})`)));
  }
  for (const st of g.states) {
    const p = pos.get(st.id);
    svg.append(s('g', { class: `state state-${st.kind}` },
      s('rect', { x: p.x, y: p.y, width: BW, height: BH, rx: 6 }),
      s('text', { x: p.x + BW / 2, y: p.y + BH / 2 + 4, 'text-anchor': 'middle' }, st.id.length > 20 ? `${st.id.slice(0, 19)}…` : st.id),
      s('title', {}, `${st.id} (${st.kind})`)));
  }
  return svg;
}

export function debugView() {
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const req = owner();
  req.run((signal) => call('debug.graphs', { signal })).then((r) => {
    if (!r.current) return;
    if (r.error) { clear(body, failure(r.error)); return; }
    clear(body, h('p', { class: 'small muted' }, `Analyst: ${r.value.analyst}${r.value.oversight ? ` · Oversight: ${r.value.oversight}` : ''}`),
      r.value.graphs.map((g) => h('section', { class: 'panel graph-panel', dataset: { cardType: g.card_type } },
        h('h2', {}, g.card_type),
        h('p', { class: 'small' }, `Agents: ${g.session_agents.join(', ')} · records: ${g.records.map((x) => x.name).join(', ')} · children: ${g.permitted_child_types.join(', ') || 'none'}`),
        h('div', { class: 'graph-wrap' }, graphSVG(g)),
        h('details', {}, h('summary', {}, 'Nodes'), json(g.nodes)))));
  });
  return { el: h('div', { class: 'debug-view' }, h('h1', {}, 'Debug: installed workflows'), body), title: 'Debug', destroy: () => req.abort() };
}
