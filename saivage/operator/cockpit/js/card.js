// The card route (five facets) and the exact session route.
import { call, owner } from './api.js';
import { h, clear, badge, fmtTime, failure, json, jsonText, markdown } from './dom.js';
import { renderRows } from './transcript.js';
import { controlPanel } from './home.js';

const FACETS = [
  ['overview', 'Overview'],
  ['conversations', 'Conversations'],
  ['executions', 'Executions'],
  ['records', 'Records & History'],
  ['evidence', 'Evidence'],
];

function crumbs(id) {
  const parts = id.split('.');
  return h('nav', { class: 'crumbs', 'aria-label': 'Card path' },
    h('a', { href: '#/' }, 'Home'),
    parts.map((_, i) => {
      const cid = parts.slice(0, i + 1).join('.');
      return [' / ', i === parts.length - 1 ? h('span', {}, cid) : h('a', { href: `#/card/${cid}` }, cid)];
    }));
}

// conversationPanel shows one session's current segment under a lease on
// its key (subscribe before fetch), keeping the last good rows on failure.
export function conversationPanel(ctx, sessionId) {
  const rows = h('div', { class: 'transcript' });
  const note = h('div', { class: 'note' });
  const el = h('div', { class: 'conversation', dataset: { session: sessionId } }, note, rows);
  const req = owner();
  const lease = ctx.live.lease('conversation', sessionId);
  let loaded = false;
  const load = async () => {
    const r = await req.run((signal) => call('agents.conversation', { params: { id: sessionId }, signal }));
    if (!r.current) return;
    if (r.error) { clear(note, failure(r.error, load)); return; }
    clear(note, h('p', { class: 'muted small' }, `Segment ${r.value.segment} of ${r.value.segments} (${r.value.segment_kind || 'ordinary'})`));
    clear(rows, renderRows(r.value.rows, { sessionId, segment: r.value.segment }));
    loaded = true;
  };
  const off = ctx.live.on('conversation', sessionId, load);
  const offRe = ctx.live.onReconnect(load);
  lease.acked.then(load);
  return { el, destroy() { req.abort(); off(); offRe(); lease.release(); }, get loaded() { return loaded; } };
}

function overviewFacet(ctx, detail) {
  const c = detail.card;
  const sessions = h('ul', { class: 'plain' });
  const children = h('ul', { class: 'plain' });
  const req = owner();
  req.run(async (signal) => {
    const [s, k] = await Promise.all([
      call('cards.agentSessions', { params: { id: c.id }, signal }),
      call('cards.children', { params: { id: c.id }, signal }),
    ]);
    return { s, k };
  }).then((r) => {
    if (!r.current) return;
    if (r.error) { sessions.append(failure(r.error)); return; }
    clear(sessions, r.value.s.agents.map((a) => h('li', {}, h('a', { href: `#/session/${encodeURIComponent(a.id)}` }, a.agent),
      ` · ${a.segments} segment(s)`, a.active ? ' · active' : '')));
    clear(children, r.value.k.children.length ? r.value.k.children.map((k) => h('li', {},
      h('a', { href: `#/card/${k.id}` }, k.id), ` ${k.title} `, badge(k.status))) : h('li', { class: 'muted' }, 'No children.'));
  });
  const el = h('div', { class: 'facet overview' },
    h('dl', { class: 'fields' },
      h('dt', {}, 'Type'), h('dd', {}, c.type),
      h('dt', {}, 'Status'), h('dd', {}, badge(c.status)),
      h('dt', {}, 'Dependencies'), h('dd', {}, c.dependencies?.length ? c.dependencies.join(', ') : 'none'),
      h('dt', {}, 'Version'), h('dd', {}, `${detail.head.version} (revision ${detail.head.revision})`),
      h('dt', {}, 'Updated'), h('dd', {}, fmtTime(c.updated_at)),
      h('dt', {}, 'Author'), h('dd', {}, c.author || '')),
    c.description ? markdown(c.description) : null,
    sourceFacts(c.git),
    h('h3', {}, 'Records'),
    h('table', { class: 'grid' }, h('thead', {}, h('tr', {}, h('th', {}, 'Record'), h('th', {}, 'Latest'), h('th', {}, 'State'))),
      h('tbody', {}, detail.records.map((r) => h('tr', {},
        h('td', {}, h('a', { href: `#/card/${c.id}/records?record=${encodeURIComponent(r.name)}` }, r.name)),
        h('td', {}, r.latest_version ? `v${r.latest_version}` : 'baseline'),
        h('td', {}, r.draft ? 'draft open' : r.selection))))),
    h('h3', {}, 'Agent sessions'), sessions,
    h('h3', {}, 'Children'), children);
  return { el, destroy: () => req.abort() };
}

// sourceFacts shows a card's native Git source facts (read-only; the
// server redacts the private ref's text): commit ids, the delivered
// commit, and why source is held or being corrected.
function sourceFacts(g) {
  if (!g) return null;
  const oid = (v) => v ? h('code', { title: v }, v.slice(0, 12)) : h('span', { class: 'muted' }, 'not yet');
  const rows = [
    h('dt', {}, 'Private ref'), h('dd', {}, g.ref),
    h('dt', {}, 'Base'), h('dd', {}, oid(g.base)),
    h('dt', {}, 'Checkpoint'), h('dd', {}, oid(g.tip)),
    h('dt', {}, 'Delivered commit'), h('dd', { dataset: { fact: 'delivered' } }, oid(g.delivered)),
  ];
  if (g.delivery_branch) rows.push(h('dt', {}, 'Delivery branch'), h('dd', {}, g.delivery_branch, g.branch ? [' at ', oid(g.branch)] : ''));
  if (g.held) rows.push(h('dt', {}, 'Held'), h('dd', { class: 'warn' }, g.held));
  if (g.correction) rows.push(h('dt', {}, 'Correction'), h('dd', {}, `${g.correction.reason} (original `, oid(g.correction.original), ', onto ', oid(g.correction.current), ')'));
  return h('section', { class: 'source', 'aria-label': 'Source' }, h('h3', {}, 'Source'), h('dl', { class: 'fields' }, rows));
}

// sessionPicker lets a facet choose one of the card's sessions.
function sessionPicker(cardId, onPick) {
  const el = h('div', { class: 'picker', role: 'group', 'aria-label': 'Agent session' });
  const req = owner();
  req.run((signal) => call('cards.agentSessions', { params: { id: cardId }, signal })).then((r) => {
    if (!r.current) return;
    if (r.error) { el.append(failure(r.error)); return; }
    const buttons = r.value.agents.map((a) => h('button', {
      type: 'button', 'aria-pressed': 'false', dataset: { session: a.id },
      onclick: (ev) => {
        buttons.forEach((b) => b.setAttribute('aria-pressed', 'false'));
        ev.currentTarget.setAttribute('aria-pressed', 'true');
        onPick(a.id);
      },
    }, a.agent));
    clear(el, buttons);
    const first = r.value.agents.find((a) => a.segments > 0) || r.value.agents[0];
    if (first) buttons[r.value.agents.indexOf(first)].click();
  });
  return { el, destroy: () => req.abort() };
}

function conversationsFacet(ctx, detail) {
  const body = h('div');
  let conv = null;
  const picker = sessionPicker(detail.card.id, (sid) => {
    conv?.destroy();
    conv = conversationPanel(ctx, sid);
    clear(body, h('p', {}, h('a', { href: `#/session/${encodeURIComponent(sid)}` }, 'Open the session route'), ' (instructions, history)'), conv.el);
  });
  return { el: h('div', { class: 'facet conversations' }, picker.el, body), destroy() { picker.destroy(); conv?.destroy(); } };
}

async function download(cardId, id, key, name) {
  const res = await call('executions.download', { params: { id: cardId, invocationId: id, fileKey: key }, raw: true });
  const url = URL.createObjectURL(await res.blob());
  const a = h('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function executionsFacet(ctx, detail) {
  const id = detail.card.id;
  const table = h('tbody');
  const info = h('p', { class: 'muted small' });
  const view = h('div', { class: 'execution-detail' });
  const listReq = owner();
  const selReq = owner();
  const fileReq = owner();
  const select = async (e) => {
    fileReq.abort();
    const r = await selReq.run((signal) => call('executions.get', { params: { id, invocationId: e.id }, signal }));
    if (!r.current) return;
    if (r.error) { clear(view, failure(r.error, () => select(e))); return; }
    const x = r.value.execution;
    const preview = h('div', { class: 'file-preview' });
    clear(view,
      h('h3', {}, `${x.tool} `, h('span', { class: 'muted small' }, `${x.agent} · ${x.state.replace('_', ' ')}`)),
      h('div', { class: 'label' }, 'Request'), jsonText(x.arguments),
      h('div', { class: 'label' }, 'Result'), x.result === null ? h('p', { class: 'muted' }, 'No result recorded.') : jsonText(x.result),
      x.files.length ? h('div', { class: 'files' }, x.files.map((f) => h('div', { class: 'row' },
        h('span', { class: 'mono small' }, f.path),
        h('button', { type: 'button', dataset: { preview: f.key }, onclick: async () => {
          const fr = await fileReq.run((signal) => call('executions.file', { params: { id, invocationId: x.id, fileKey: f.key }, signal }));
          if (!fr.current) return;
          clear(preview, fr.error ? failure(fr.error) : h('pre', { class: 'file-text' }, fr.value.file.text));
        } }, 'Preview'),
        h('button', { type: 'button', onclick: () => download(id, x.id, f.key, f.path.split('/').pop()).catch((err) => clear(preview, failure(err))) }, 'Download')))) : null,
      preview);
  };
  const load = async () => {
    const r = await listReq.run((signal) => call('executions.list', { params: { id }, query: { limit: 200 }, signal }));
    if (!r.current) return;
    if (r.error) { info.replaceChildren(failure(r.error, load)); return; }
    info.textContent = `${r.value.total} invocation(s)${r.value.has_earlier ? ', newest shown' : ''}.`;
    clear(table, r.value.executions.map((e) => h('tr', { dataset: { invocation: e.id } },
      h('td', {}, h('button', { type: 'button', class: 'link', onclick: () => select(e) }, e.tool)),
      h('td', {}, e.agent), h('td', {}, e.state.replace('_', ' ')), h('td', { class: 'mono small clip' }, e.arguments))));
  };
  load();
  const off = ctx.live.on('card', id, load);
  return {
    el: h('div', { class: 'facet executions' }, info,
      h('table', { class: 'grid' }, h('thead', {}, h('tr', {}, h('th', {}, 'Tool'), h('th', {}, 'Agent'), h('th', {}, 'State'), h('th', {}, 'Arguments'))), table),
      view),
    destroy() { listReq.abort(); selReq.abort(); fileReq.abort(); off(); },
  };
}

function recordsFacet(ctx, detail, query) {
  const id = detail.card.id;
  const current = h('div', { class: 'record-current' });
  const versions = h('ol', { class: 'versions' });
  const diff = h('pre', { class: 'diff' });
  const cardHist = h('ol', { class: 'versions' });
  const cardDiff = h('pre', { class: 'diff' });
  const recReq = owner();
  const diffReq = owner();
  const cardReq = owner();
  let selected = query.get('record') || detail.records[0]?.name;
  const picker = h('div', { class: 'picker', role: 'group', 'aria-label': 'Record' }, detail.records.map((r) => h('button', {
    type: 'button', 'aria-pressed': String(r.name === selected), dataset: { record: r.name },
    onclick: (ev) => {
      picker.querySelectorAll('button').forEach((b) => b.setAttribute('aria-pressed', 'false'));
      ev.currentTarget.setAttribute('aria-pressed', 'true');
      selected = r.name;
      loadRecord();
    },
  }, r.name)));
  const showDiff = async (from, to) => {
    const r = await diffReq.run((signal) => call('cards.recordDiff', { params: { id, name: selected }, query: { from, to }, signal }));
    if (!r.current) return;
    diff.textContent = r.error ? `Diff unavailable: ${r.error.message}` : (r.value.diff || '(no changes)');
  };
  const loadRecord = async () => {
    if (!selected) return;
    const r = await recReq.run((signal) => Promise.all([
      call('cards.record', { params: { id, name: selected }, signal }),
      call('cards.recordHistory', { params: { id, name: selected }, signal }),
    ]));
    if (!r.current) return;
    if (r.error) { clear(current, failure(r.error, loadRecord)); return; }
    const [rec, hist] = r.value;
    clear(current, h('p', { class: 'muted small' }, `${selected}: ${rec.draft ? 'open draft' : rec.version ? `accepted v${rec.version}` : 'baseline'}`),
      h('pre', { class: 'record-text' }, rec.content));
    clear(versions, hist.versions.length ? hist.versions.map((v) => h('li', {},
      h('button', { type: 'button', class: 'link', onclick: () => showDiff(v.version - 1, v.version) }, `v${v.version}`),
      ` by ${v.author} · ${fmtTime(v.accepted_at)} · ${v.bytes} bytes`)) : h('li', { class: 'muted' }, 'No accepted versions yet.'));
    diff.textContent = '';
    if (hist.versions.length) showDiff(Math.max(hist.versions.length - 1, 0), hist.versions.length);
  };
  const loadCard = async () => {
    const r = await cardReq.run(async (signal) => {
      const hist = await call('cards.history', { params: { id }, signal });
      const d = hist.versions.length > 1 ? await call('cards.diff', { params: { id }, signal }) : null;
      return { hist, d };
    });
    if (!r.current) return;
    if (r.error) { clear(cardHist, failure(r.error, loadCard)); return; }
    clear(cardHist, r.value.hist.versions.map((v) => h('li', {}, `v${v.version} `, badge(v.status), ` ${v.kind} · ${fmtTime(v.updated_at)}`)));
    cardDiff.textContent = r.value.d ? r.value.d.diff : 'Only one version.';
  };
  loadRecord();
  loadCard();
  const off = ctx.live.on('card', id, () => { loadRecord(); loadCard(); });
  return {
    el: h('div', { class: 'facet records' }, picker,
      h('div', { class: 'two' },
        h('div', {}, h('h3', {}, 'Current'), current),
        h('div', {}, h('h3', {}, 'Accepted versions'), versions, h('h3', {}, 'Diff'), diff)),
      h('h3', {}, 'Card history'), cardHist, h('h3', {}, 'Latest card change'), cardDiff),
    destroy() { recReq.abort(); diffReq.abort(); cardReq.abort(); off(); },
  };
}

function evidenceFacet(ctx, detail) {
  const body = h('div', { class: 'exchange' });
  const policy = h('p', { class: 'small' });
  const req = owner();
  let lease = null;
  let off = null;
  const show = async (sid) => {
    const r = await req.run((signal) => call('agents.llmExchange', { params: { id: sid }, signal }));
    if (!r.current) return;
    if (r.error) { clear(body, r.error.status === 404 ? h('p', { class: 'muted' }, `No model exchange recorded for ${sid}.`) : failure(r.error, () => show(sid))); return; }
    const x = r.value.exchange;
    clear(body,
      h('dl', { class: 'fields' },
        h('dt', {}, 'Route'), h('dd', {}, x.route || ''),
        h('dt', {}, 'Provider / model'), h('dd', {}, `${x.provider || '?'} / ${x.upstream_model || '?'}`),
        h('dt', {}, 'Outcome'), h('dd', {}, `${x.outcome}${x.error ? `: ${x.error}` : ''}`),
        h('dt', {}, 'Attempts'), h('dd', {}, (x.attempts || []).map((a) => `${a.provider}/${a.model} ${a.status || ''} ${a.outcome}`).join('; ') || 'none'),
        h('dt', {}, 'Usage'), h('dd', {}, x.usage ? `${x.usage.prompt_tokens} in, ${x.usage.completion_tokens} out` : 'not reported'),
        h('dt', {}, 'Request'), h('dd', {}, `${x.messages} messages, ${x.tools} tools, ${x.request_bytes} bytes, sha256 ${String(x.request_sha256).slice(0, 16)}…`),
        h('dt', {}, 'Time'), h('dd', {}, `${fmtTime(x.ts)} · ${x.duration_ms} ms`)),
      h('h3', {}, 'Response'), x.response ? [markdown(x.response.content), x.response.tool_calls ? json(x.response.tool_calls) : null] : h('p', { class: 'muted' }, 'No response recorded.'),
      h('details', {}, h('summary', {}, 'Exact request'), json(x.request)));
  };
  const picker = sessionPicker(detail.card.id, (sid) => {
    lease?.release(); off?.();
    lease = ctx.live.lease('exchange', sid);
    off = ctx.live.on('exchange', sid, () => show(sid));
    lease.acked.then(() => show(sid));
  });
  call('runtime.contentPolicy').then((cp) => {
    policy.textContent = cp.refusals ? `Content-policy refusals: ${cp.refusals}; latest in ${cp.latest.session} at ${fmtTime(cp.latest.ts)}.` : 'No content-policy refusals recorded.';
  }, () => { policy.textContent = 'Content-policy count unavailable.'; });
  return {
    el: h('div', { class: 'facet evidence' }, policy, picker.el, body),
    destroy() { req.abort(); picker.destroy(); lease?.release(); off?.(); },
  };
}

// cardView owns the selected card's detail and the active facet.
export function cardView(ctx, id, facet = 'overview') {
  const head = h('div', { class: 'card-head' });
  const tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Card facets' });
  const body = h('div', { class: 'facet-body', role: 'tabpanel' });
  const ctl = controlPanel(ctx);
  const el = h('div', { class: 'card-view', dataset: { card: id } }, h('div', { class: 'card-top' }, crumbs(id), ctl.el), head, tabs, body);
  const req = owner();
  const lease = ctx.live.lease('card', id);
  let detail = null;
  let active = null;
  let query = new URLSearchParams();
  const renderFacet = () => {
    active?.destroy();
    active = null;
    clear(tabs, FACETS.map(([k, label]) => h('a', {
      role: 'tab', href: `#/card/${id}/${k}`, 'aria-selected': String(k === facet), dataset: { facet: k },
    }, label)));
    if (!detail) return;
    const make = { overview: overviewFacet, conversations: conversationsFacet, executions: executionsFacet, records: recordsFacet, evidence: evidenceFacet }[facet] || overviewFacet;
    active = make(ctx, detail, query);
    clear(body, active.el);
  };
  const load = async () => {
    const r = await req.run((signal) => call('cards.get', { params: { id }, signal }));
    if (!r.current) return;
    if (r.error) {
      if (r.error.status === 404) { detail = null; active?.destroy(); active = null; clear(body); }
      head.querySelector('.failure')?.remove();
      head.append(failure(r.error, load));
      return;
    }
    const first = !detail;
    detail = r.value;
    const c = detail.card;
    clear(head, h('h1', {}, h('span', { class: 'mono' }, c.id), ' ', c.title, ' ', badge(c.status)),
      h('p', { class: 'muted small' }, `${c.type} · version ${detail.head.version}`));
    if (first || facet === 'overview') renderFacet();
  };
  const off = ctx.live.on('card', id, load);
  const offRe = ctx.live.onReconnect(load);
  renderFacet();
  lease.acked.then(load);
  return {
    el,
    title: id,
    update(parts, q) {
      facet = parts[2] || 'overview';
      query = q;
      renderFacet();
    },
    destroy() { req.abort(); off(); offRe(); lease.release(); active?.destroy(); ctl.destroy(); },
  };
}

// sessionView is the exact session route, global or per card.
export function sessionView(ctx, id) {
  const head = h('div');
  const ins = h('details', { class: 'instructions' }, h('summary', {}, 'Current instructions'));
  const insBody = h('div');
  const insReq = owner();
  const loadIns = async () => {
    clear(insBody, h('p', { class: 'muted' }, 'Loading…'));
    const r = await insReq.run((signal) => call('agents.currentInstructions', { params: { id }, signal }));
    if (!r.current) return;
    if (r.error) { clear(insBody, failure(r.error, loadIns)); return; }
    clear(insBody, h('button', { type: 'button', onclick: loadIns }, 'Refresh'),
      r.value.instructions.length ? r.value.instructions.map((i) => h('section', { class: 'binding' },
        h('h4', {}, `${i.binding}${i.node ? ` · ${i.node}` : ''}${i.from ? ` (from ${i.from})` : ''}`, ' ', h('span', { class: 'muted small mono' }, i.reference)),
        markdown(i.text))) : h('p', { class: 'muted' }, 'No static instructions are bound.'));
  };
  ins.append(insBody);
  ins.addEventListener('toggle', () => { if (ins.open) loadIns(); else { insReq.abort(); clear(insBody); } });
  const conv = conversationPanel(ctx, id);
  const req = owner();
  req.run((signal) => call('agents.get', { params: { id }, signal })).then((r) => {
    if (!r.current) return;
    if (r.error) { clear(head, h('h1', {}, id), failure(r.error)); return; }
    const s = r.value;
    clear(head, h('h1', {}, s.agent, ' ', h('span', { class: 'muted small mono' }, s.id)),
      h('p', { class: 'small' }, s.card ? ['Card ', h('a', { href: `#/card/${s.card}/conversations` }, s.card)] : 'Global session',
        ` · ${s.segments} segment(s)${s.active ? ' · active' : ''}`));
  });
  return {
    el: h('div', { class: 'session-view' }, head, ins, conv.el),
    title: id,
    destroy() { req.abort(); insReq.abort(); conv.destroy(); },
  };
}
