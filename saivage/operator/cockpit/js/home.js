// Home: project objective and runtime control, the card tree (one level
// per request), the Analyst panel and the event feed.
import { call, owner, trailing } from './api.js';
import { h, clear, badge, fmtTime, failure, markdown } from './dom.js';
import { renderRows } from './transcript.js';

// Control admission mirrors the Supervisor: the server still decides and
// answers 409 NotAdmitted when the status changed meanwhile.
const controls = [
  { op: 'runtime.run', label: 'Run', when: ['stopped', 'error'] },
  { op: 'runtime.pause', label: 'Pause', when: ['running'] },
  { op: 'runtime.resume', label: 'Resume', when: ['paused', 'pausing'] },
  { op: 'runtime.stop', label: 'Stop', when: ['running', 'pausing', 'paused'], danger: true },
];

export function controlPanel(ctx) {
  const msg = h('p', { class: 'control-msg', role: 'status' });
  const buttons = controls.map((c) => h('button', {
    type: 'button', class: c.danger ? 'danger' : 'primary', dataset: { control: c.label.toLowerCase() },
    onclick: async (ev) => {
      ev.currentTarget.disabled = true;
      msg.textContent = `${c.label}…`;
      try {
        const res = await call(c.op);
        msg.textContent = `${c.label}: runtime is ${res.runtime.status}.`;
      } catch (e) {
        msg.textContent = `${c.label} refused: ${e.message}`;
      }
      ctx.runtime.refresh();
    },
  }, c.label));
  const el = h('div', { class: 'controls' }, h('div', { class: 'row' }, buttons), msg);
  const off = ctx.runtime.subscribe((state) => {
    const st = state?.runtime?.status;
    buttons.forEach((b, i) => { b.disabled = !controls[i].when.includes(st); });
  });
  return { el, destroy: off };
}

// treeNode is one card of the tree; expanding it loads its immediate
// children (one request) under a lease on the card's key.
function treeNode(ctx, card, cleanups) {
  const kids = h('ul', { class: 'tree-children', role: 'group', hidden: true });
  const toggle = h('button', { type: 'button', class: 'twisty', 'aria-expanded': 'false', 'aria-label': `Show children of ${card.id}` }, '▸');
  const status = badge(card.status);
  const li = h('li', { role: 'treeitem', dataset: { card: card.id }, 'aria-expanded': 'false' },
    h('div', { class: 'tree-row' }, toggle,
      h('a', { href: `#/card/${card.id}` }, h('span', { class: 'card-id mono' }, card.id), ' ', h('span', { class: 'card-title' }, card.title)),
      h('span', { class: 'card-type muted small' }, card.type), status),
    kids);
  const req = owner();
  let lease = null;
  let offHint = null;
  let offReconnect = null;
  let nodes = [];
  // Hints and reconnects refetch through one request and one trailing.
  const load = trailing(async () => {
    if (!lease) return; // collapsed meanwhile
    const r = await req.run((signal) => call('cards.children', { params: { id: card.id }, signal }));
    if (!r.current) return;
    if (r.error) {
      kids.querySelector(':scope > .failure')?.remove();
      kids.prepend(failure(r.error, load));
      return;
    }
    // Replaced rows release their leases; expanded ones are rebuilt
    // expanded (the same selection keeps its state).
    const open = new Set(nodes.filter((n) => n.isOpen()).map((n) => n.id));
    nodes.forEach((n) => n.collapse());
    nodes = r.value.children.map((c) => treeNode(ctx, c, cleanups));
    nodes.forEach((n) => { if (open.has(n.id)) n.expand(); });
    clear(kids, nodes.length ? nodes.map((n) => n.li) : h('li', { class: 'muted small empty' }, 'No children.'));
  });
  const expand = async () => {
    toggle.setAttribute('aria-expanded', 'true');
    li.setAttribute('aria-expanded', 'true');
    toggle.textContent = '▾';
    kids.hidden = false;
    lease = ctx.live.lease('card', card.id);
    offHint = ctx.live.on('card', card.id, load);
    offReconnect = ctx.live.onReconnect(load);
    cleanups.add(collapse);
    await lease.acked; // subscribe before fetch
    await load();
  };
  function collapse() {
    nodes.forEach((n) => n.collapse());
    nodes = [];
    req.abort();
    lease?.release();
    offHint?.();
    offReconnect?.();
    lease = offHint = offReconnect = null;
    cleanups.delete(collapse);
    toggle.setAttribute('aria-expanded', 'false');
    li.setAttribute('aria-expanded', 'false');
    toggle.textContent = '▸';
    kids.hidden = true;
  }
  toggle.addEventListener('click', () => (lease ? collapse() : expand()));
  return { li, id: card.id, expand, collapse, isOpen: () => lease !== null };
}

// treePanel calls onRoot with each cards.get response of the root card.
function treePanel(ctx, onRoot) {
  const cleanups = new Set();
  const list = h('ul', { class: 'tree', role: 'tree', 'aria-label': 'Card tree' });
  const el = h('section', { class: 'panel tree-panel', 'aria-labelledby': 'tree-h' }, h('h2', { id: 'tree-h' }, 'Cards'), list);
  // The root's row and its first level load in parallel: the root id is
  // known, its children need no detail first.
  const root = treeNode(ctx, { id: 'project', title: '', type: '', status: 'unknown', children: 1 }, cleanups);
  clear(list, root.li);
  root.expand();
  const req = owner();
  const lease = ctx.live.lease('card', 'project');
  const loadRoot = async () => {
    const r = await req.run((signal) => call('cards.get', { params: { id: 'project' }, signal }));
    if (!r.current) return;
    const row = root.li.querySelector('.tree-row');
    row.querySelector(':scope > .failure')?.remove();
    if (r.error) { row.append(failure(r.error, loadRoot)); return; }
    const c = r.value.card;
    onRoot(r.value);
    row.querySelector('.card-title').textContent = c.title;
    row.querySelector('.card-type').textContent = c.type;
    row.querySelector(':scope > .badge').replaceWith(badge(c.status));
  };
  const off = ctx.live.on('card', 'project', loadRoot);
  const offRe = ctx.live.onReconnect(loadRoot);
  lease.acked.then(loadRoot);
  return {
    el,
    destroy() {
      req.abort();
      off();
      offRe();
      lease.release();
      [...cleanups].forEach((fn) => fn());
    },
  };
}

// analystPanel owns the Analyst transcript and submissions. Busy (409)
// removes only the optimistic message and restores the draft if the input
// is empty; there is no queue.
export function analystPanel(ctx) {
  const transcript = h('div', { class: 'transcript', 'aria-live': 'polite' });
  const input = h('textarea', { id: 'analyst-input', rows: 3, placeholder: 'Ask the Analyst…', 'aria-label': 'Message to the Analyst' });
  const status = h('p', { class: 'analyst-status small', role: 'status' });
  const send = h('button', { type: 'submit', class: 'primary' }, 'Send');
  const form = h('form', { class: 'composer' }, input, h('div', { class: 'row' }, status, send));
  const el = h('section', { class: 'panel analyst', 'aria-labelledby': 'analyst-h' }, h('h2', { id: 'analyst-h' }, 'Analyst'), transcript, form);
  let session = 'agent:analyst:global';
  let lease = null;
  let offConv = null;
  const convReq = owner();
  const infoReq = owner();
  let shown = null; // the rows last rendered, as JSON
  const loadTranscript = trailing(async () => {
    const r = await convReq.run((signal) => call('agents.conversation', { params: { id: session }, signal }));
    if (!r.current) return;
    if (r.error) { status.textContent = `Transcript not refreshed: ${r.error.message}`; return; }
    // A turn sends both an analyst and a conversation hint; rebuilding an
    // unchanged transcript would only hold the page's main thread.
    const rows = JSON.stringify([session, r.value.rows]);
    if (rows === shown) return;
    shown = rows;
    const pending = transcript.querySelector('.optimistic');
    clear(transcript, renderRows(r.value.rows, { sessionId: session, segment: r.value.segment }), pending);
    transcript.scrollTop = transcript.scrollHeight;
  });
  const loadInfo = async () => {
    const r = await infoReq.run((signal) => call('chat.get', { signal }));
    if (!r.current || r.error) return;
    if (r.value.session !== session || !lease) {
      lease?.release(); offConv?.();
      session = r.value.session;
      lease = ctx.live.lease('conversation', session);
      offConv = ctx.live.on('conversation', session, loadTranscript);
      await lease.acked;
    }
    const info = r.value;
    status.textContent = info.busy ? 'The Analyst is working…' : (info.last?.error ? `Last turn failed: ${info.last.error}` : '');
    el.dataset.busy = info.busy ? 'true' : 'false';
    transcript.querySelector('.optimistic')?.remove();
    await loadTranscript();
  };
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    const draft = input.value;
    input.value = '';
    const mine = h('div', { class: 'msg user optimistic' }, h('div', { class: 'who' }, 'You'), text);
    transcript.append(mine);
    transcript.scrollTop = transcript.scrollHeight;
    try {
      await call('chat.post', { body: { message: text } });
      status.textContent = 'The Analyst is working…';
      el.dataset.busy = 'true';
    } catch (e) {
      mine.remove();
      if (!input.value) input.value = draft;
      status.textContent = e.status === 409 ? 'The Analyst is busy with another turn; your message was not sent.' : `Not sent: ${e.message}`;
      el.dataset.refused = e.code || 'error';
    }
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey) { ev.preventDefault(); form.requestSubmit(); }
  });
  const offInfo = ctx.live.on('analyst', null, loadInfo);
  const offRe = ctx.live.onReconnect(loadInfo);
  loadInfo();
  return {
    el,
    destroy() { convReq.abort(); infoReq.abort(); lease?.release(); offConv?.(); offInfo(); offRe(); },
  };
}

function eventsPanel(ctx) {
  const list = h('ol', { class: 'events' });
  const el = h('section', { class: 'panel events-panel', 'aria-labelledby': 'events-h' }, h('h2', { id: 'events-h' }, 'Recent events'), list);
  const req = owner();
  let known = null; // the event count at the last load
  let shown = null; // the events last rendered, as JSON
  const load = trailing(async () => {
    const r = await req.run(async (signal) => {
      // Once the count is known, one request from 15 before it, with room
      // for what was added since, returns the tail; otherwise (first load,
      // a burst, retention) the count is asked first.
      if (known !== null) {
        const page = await call('events.list', { query: { offset: Math.max(known - 15, 0), limit: 200 }, signal });
        if (page.offset + page.events.length === page.total && page.events.length >= Math.min(15, page.total)) return page;
      }
      const head = await call('events.list', { query: { limit: 1 }, signal });
      return call('events.list', { query: { offset: Math.max(head.total - 15, 0), limit: 15 }, signal });
    });
    if (!r.current) return;
    if (r.error) { list.before(failure(r.error, load)); return; }
    known = r.value.total;
    el.querySelector('.failure')?.remove();
    const tail = r.value.events.slice(-15);
    const sig = JSON.stringify(tail);
    if (sig === shown) return;
    shown = sig;
    clear(list, tail.reverse().map((e) => h('li', {},
      h('span', { class: 'mono small muted' }, fmtTime(e.ts)), ' ', h('strong', {}, e.type), ' ',
      h('span', { class: 'small' }, e.data ? Object.entries(e.data).map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' ') : ''))));
  });
  const off = ctx.live.on('events', null, load);
  const offRe = ctx.live.onReconnect(load);
  load();
  return { el, destroy() { req.abort(); off(); offRe(); } };
}

export function homeView(ctx) {
  const objective = h('div', { class: 'objective' });
  const goal = h('div', { class: 'objective-text' });
  const objReq = owner();
  // The project objective is the root's objective record.
  const loadObjective = async () => {
    const r = await objReq.run((signal) => call('cards.record', { params: { id: 'project', name: 'objective' }, signal }));
    if (r.current && !r.error) clear(goal, markdown(r.value.content));
  };
  // A root hint refetches the root card (the tree's row); its record
  // descriptors say whether the objective changed, so the record itself is
  // fetched only then.
  let objectiveHead = null;
  const onRoot = (got) => {
    const d = got.records.find((x) => x.name === 'objective');
    const key = d ? `${d.head_uuid}|${d.latest_version}|${d.revision}|${d.draft}` : '';
    if (key === objectiveHead) return;
    objectiveHead = key;
    loadObjective();
  };
  const ctl = controlPanel(ctx);
  const off = ctx.runtime.subscribe((state) => {
    const card = state?.project?.card;
    const run = state?.runtime;
    clear(objective,
      h('h1', {}, card?.title || 'Project'),
      h('p', { class: 'muted small' }, state?.project?.root || ''),
      h('p', {}, 'Root card ', card ? badge(card.status) : '', ' · runtime ', run ? badge(run.status) : '',
        run?.activations?.length ? ` · active: ${run.activations.join(' → ')}` : '',
        run?.last_run && run.status === 'stopped' ? ` · last run ${run.last_run.outcome}` : ''), goal);
  });
  const tree = treePanel(ctx, onRoot);
  const analyst = analystPanel(ctx);
  const events = eventsPanel(ctx);
  const el = h('div', { class: 'home' },
    h('section', { class: 'panel head' }, objective, ctl.el),
    tree.el, analyst.el, events.el);
  return { el, title: 'Home', destroy() { off(); objReq.abort(); ctl.destroy(); tree.destroy(); analyst.destroy(); events.destroy(); } };
}
