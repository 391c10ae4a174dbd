// The Action Center page: background items of work that may need the user.
// GET /actions lists them (filtered in SQLite before the limit); the two
// flags persist in localStorage and are reapplied on every (re)connection.
// Selecting an item marks it read and opens its detail; executing a step or
// refining the proposal goes through a chat, so every write meets the same
// approval card as anywhere else.

import { h, clear, fmtTime } from './dom.js';
import { api } from './conn.js';

export const SHOW_DONE = 'steward.actions.showDone';
export const HIDE_EXPIRED = 'steward.actions.hideExpired';
const STATUSES = ['new', 'read', 'done', 'dismissed'];

const flag = (key) => localStorage.getItem(key) === '1';

// query is the list request for the stored flags.
export function query() {
  const q = new URLSearchParams({ limit: '100' });
  if (flag(SHOW_DONE)) q.set('showDone', '1');
  if (flag(HIDE_EXPIRED)) q.set('hideExpired', '1');
  return `/actions?${q}`;
}

// countLabel is a status card's figure: visible/total when they differ.
export function countLabel(visible, total) {
  return visible === total ? String(total) : `${visible}/${total}`;
}

// refreshBadge updates the sidebar's badge with the visible new items.
export async function refreshBadge() {
  const badge = document.getElementById('actions-badge');
  if (!badge) return;
  try {
    const res = await api(query());
    const n = res.countsVisible?.new || 0;
    badge.textContent = n ? String(n) : '';
    badge.hidden = !n;
  } catch { /* the page shows errors; the badge stays as it was */ }
}

export function render(app, arg) {
  const list = h('ul', { class: 'actions-list', 'aria-label': 'Actions' });
  const cards = h('div', { class: 'action-counts' });
  const detail = h('section', { class: 'action-detail', 'aria-live': 'polite', hidden: true });
  const toggles = [[SHOW_DONE, 'actions-show-done', 'Include completed and dismissed'], [HIDE_EXPIRED, 'actions-hide-expired', 'Hide expired']]
    .map(([key, id, label]) => {
      const box = h('input', { type: 'checkbox', id, checked: flag(key), 'on:change': () => {
        localStorage.setItem(key, box.checked ? '1' : '0');
        load();
      } });
      return h('label', { class: 'toggle', for: id }, box, ` ${label}`);
    });
  const page = h('section', { class: 'page actions-page', 'aria-labelledby': 'actions-title' },
    h('header', { class: 'view-header' }, h('h2', { id: 'actions-title' }, 'Actions'),
      h('button', { type: 'button', 'on:click': () => load() }, 'Refresh')),
    h('div', { class: 'action-filters' }, ...toggles), cards,
    h('div', { class: 'actions-body' }, list, detail));
  let selected = Number(arg) || 0;

  async function load() {
    // The stored flags win: another tab, or a reload, may have changed them.
    toggles[0].querySelector('input').checked = flag(SHOW_DONE);
    toggles[1].querySelector('input').checked = flag(HIDE_EXPIRED);
    page.setAttribute('aria-busy', 'true');
    try {
      const res = await api(query());
      drawCounts(res);
      drawList(res.items || []);
      page.dataset.loaded = String(Number(page.dataset.loaded || 0) + 1);
      refreshBadge();
      if (selected) select(selected);
    } catch (err) {
      clear(list).append(h('li', { class: 'error', role: 'alert' }, `Could not load the actions: ${err.message}`));
    }
    page.removeAttribute('aria-busy');
  }

  function drawCounts(res) {
    clear(cards).append(...STATUSES.map((s) => {
      const v = res.countsVisible?.[s] || 0;
      const t = res.countsTotal?.[s] || 0;
      return h('div', { class: 'stat', dataset: { status: s, visible: String(v), total: String(t) } },
        h('div', { class: 'value' }, countLabel(v, t)), h('div', { class: 'label' }, s));
    }));
  }

  function drawList(items) {
    clear(list).append(...items.map((it) => h('li', null,
      h('button', { type: 'button', class: ['action-row', it.id === selected && 'current', `status-${it.status}`], dataset: { actionId: String(it.id), status: it.status },
        'on:click': () => select(it.id) },
      h('span', { class: ['badge', it.priority === 'high' ? 'warn' : ''] }, it.priority),
      h('span', { class: 'action-title' }, it.title),
      it.dueAt ? h('span', { class: 'muted small' }, ` due ${fmtTime(it.dueAt)}`) : null,
      h('span', { class: 'muted small action-status' }, ` ${it.status}`)))));
    if (!items.length) list.append(h('li', { class: 'muted empty-list' }, 'Nothing needs you right now.'));
  }

  async function select(id) {
    selected = id;
    for (const b of list.querySelectorAll('.action-row')) b.classList.toggle('current', b.dataset.actionId === String(id));
    try {
      const it = await api(`/actions/${id}?select=1`);
      const row = list.querySelector(`[data-action-id="${id}"]`);
      if (row) {
        row.dataset.status = it.status;
        row.querySelector('.action-status').textContent = ` ${it.status}`;
      }
      drawDetail(it);
      refreshBadge();
    } catch (err) {
      detail.hidden = false;
      clear(detail).append(h('p', { class: 'error', role: 'alert' }, `Could not open the action: ${err.message}`));
    }
  }

  async function setStatus(it, status) {
    try {
      await api(`/actions/${it.id}/status`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ status }) });
      await load();
    } catch (err) {
      app.toast(`Could not update the action: ${err.message}`);
    }
  }

  // inChat starts a chat whose first message asks the agent to work on the
  // item; the agent's tools go through the usual approval cards.
  async function inChat(text) {
    try {
      const f = await app.conn.request({ type: 'chat.create', title: text.slice(0, 60) });
      if (!app.conn.send({ type: 'user.message', chatId: f.chat.id, text })) throw new Error('not connected');
      app.go(`#/c/${f.chat.id}`);
    } catch (err) {
      app.toast(`Could not start the chat: ${err.message}`);
    }
  }

  function drawDetail(it) {
    detail.hidden = false;
    detail.dataset.actionId = String(it.id);
    const refine = h('textarea', { id: 'action-refine', rows: 2, placeholder: 'What should change?', 'aria-label': 'Refinement request' });
    const alts = (it.proposal || []).map((alt, ai) => h('div', { class: 'action-alt' },
      h('h4', null, `${alt.summary} `, h('span', { class: 'muted small' }, `confidence ${Math.round((alt.confidence || 0) * 100)}%`)),
      h('ol', null, ...(alt.steps || []).map((st, si) => h('li', { class: 'action-step', dataset: { tool: st.tool || '' } },
        h('span', null, st.label || st.tool || 'Step'), ' ',
        st.type === 'tool'
          ? [h('code', { class: 'small' }, st.tool), ' ', h('button', { type: 'button', class: 'primary', 'aria-label': `Execute ${st.label || st.tool}`,
            'on:click': () => inChat(`Execute step ${si} of alternative ${ai} of Action Center item #${it.id} with execute_action_step.`) }, 'Execute')]
          : h('span', { class: 'muted small' }, st.notes || (st.links || []).join(' ')))))));
    // Native append would print a null as text: the optional parts are filtered.
    clear(detail).append(...[
      h('h3', null, it.title),
      h('p', { class: 'muted small' }, `${it.kind} · ${it.priority} · `, h('span', { class: 'detail-status' }, it.status),
        it.dueAt ? ` · due ${fmtTime(it.dueAt)}` : ''),
      h('p', null, it.summary),
      ...alts,
      (it.diagnostics || []).length ? h('details', null, h('summary', null, 'Diagnostics'), h('pre', null, it.diagnostics.join('\n'))) : null,
      h('div', { class: 'actions' },
        h('button', { type: 'button', 'on:click': () => setStatus(it, 'done') }, 'Mark done'),
        h('button', { type: 'button', 'on:click': () => setStatus(it, 'dismissed') }, 'Dismiss')),
      h('form', { class: 'inline-form', 'on:submit': (e) => {
        e.preventDefault();
        inChat(`Refine Action Center item #${it.id} with revise_action: ${refine.value.trim() || 'improve the proposal'}`);
      } }, refine, h('button', { type: 'submit' }, 'Refine in chat'))].filter(Boolean));
  }

  // Every (re)connection reapplies the stored flags.
  const onStatus = (e) => {
    if (!page.isConnected) {
      app.conn.removeEventListener('status', onStatus);
      return;
    }
    if (e.detail === 'open') load();
  };
  app.conn.addEventListener('status', onStatus);
  load();
  return page;
}
