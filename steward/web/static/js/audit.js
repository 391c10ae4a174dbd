// The Audit page: GET /audit with the filters the host supports, a timeline,
// and a detail view of one event's redacted payload and linked files.

import { h, clear, fmtTime, json, safeHref, icon } from './dom.js';
import { api, download } from './conn.js';

const PAGE = 100;

export function render(app) {
  const saved = JSON.parse(sessionStorage.getItem('steward.audit.filters') || '{}');
  const input = (name, label, type = 'text', attrs = {}) => {
    const el = h('input', { id: `audit-${name}`, name, type, ...attrs });
    el.value = saved[name] || '';
    return [el, h('div', { class: 'field' }, h('label', { for: `audit-${name}` }, label), el)];
  };
  const select = (name, label, options) => {
    const el = h('select', { id: `audit-${name}`, name }, h('option', { value: '' }, 'any'), options.map((o) => h('option', { value: o }, o)));
    el.value = saved[name] || '';
    return [el, h('div', { class: 'field' }, h('label', { for: `audit-${name}` }, label), el)];
  };
  const chatOptions = [...app.chats.values()].map((c) => c.id);
  const fields = [
    select('actor', 'Actor', ['user', 'assistant', 'agent', 'host', 'scheduler', 'watch']),
    input('type', 'Event type', 'text', { placeholder: 'e.g. tool.result' }),
    select('risk', 'Risk', ['low', 'medium', 'high']),
    input('chat', 'Chat id', 'text', { list: 'audit-chats' }),
    input('tool', 'Tool', 'text', { placeholder: 'mcp__mail__send_email' }),
    input('from', 'From', 'date'),
    input('to', 'To', 'date'),
    input('q', 'Text', 'search', { placeholder: 'search summaries and payloads' }),
  ];
  const list = h('ol', { class: 'timeline', 'aria-label': 'Audit events' });
  const detail = h('div', { class: 'detail-slot' });
  const more = h('button', { type: 'button', hidden: true, 'on:click': () => load(true) }, 'Older events');
  const note = h('p', { class: 'muted', role: 'status' });
  let cursor = '';
  const form = h('form', { class: 'filters', 'aria-label': 'Filters', 'on:submit': (e) => {
    e.preventDefault();
    load(false);
  } },
  fields.map(([, wrap]) => wrap),
  h('datalist', { id: 'audit-chats' }, chatOptions.map((id) => h('option', { value: id }, app.chats.get(id)?.title))),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Apply'),
    h('button', { type: 'button', 'on:click': () => {
      for (const [el] of fields) el.value = '';
      load(false);
    } }, 'Clear')));
  const page = h('section', { class: 'page audit-page', 'aria-labelledby': 'audit-title' },
    h('header', { class: 'view-header' }, h('h2', { id: 'audit-title' }, 'Audit trail')),
    form, note, detail, list, more);

  async function load(older) {
    const params = new URLSearchParams();
    const values = {};
    for (const [el] of fields) {
      if (el.value) {
        values[el.name] = el.value;
        // Dates are local days: from is the day's start; to (exclusive on
        // the host) is the start of the next day.
        if (el.name === 'from') params.set('from', new Date(`${el.value}T00:00:00`).toISOString());
        else if (el.name === 'to') {
          const end = new Date(`${el.value}T00:00:00`);
          end.setDate(end.getDate() + 1);
          params.set('to', end.toISOString());
        }
        else params.set(el.name, el.value);
      }
    }
    sessionStorage.setItem('steward.audit.filters', JSON.stringify(values));
    params.set('limit', String(PAGE));
    if (older && cursor) params.set('before', cursor);
    page.setAttribute('aria-busy', 'true');
    try {
      const res = await api(`/audit?${params}`);
      const events = res.events || [];
      if (!older) {
        clear(list);
        clear(detail);
      }
      for (const ev of events) list.append(row(ev, () => show(ev)));
      cursor = res.next || '';
      more.hidden = !cursor;
      note.textContent = list.children.length === 0 ? 'No events match these filters.' : `${list.children.length} event${list.children.length === 1 ? '' : 's'}`;
      page.dataset.loaded = '1';
    } catch (err) {
      note.textContent = `Could not load the audit trail: ${err.message}`;
      note.className = 'error';
    }
    page.removeAttribute('aria-busy');
  }

  function show(ev) {
    clear(detail).append(h('article', { class: 'detail', 'aria-label': 'Event detail', tabindex: '-1' },
      h('header', { class: 'view-header' }, h('h3', null, ev.type), h('button', { type: 'button', 'on:click': () => clear(detail) }, 'Close')),
      h('dl', null,
        [['Time', fmtTime(ev.time)], ['Actor', ev.actor], ['Risk', ev.risk], ['Chat', ev.chatId], ['Tool', ev.tool],
          ['Correlation', ev.correlationId], ['Summary', ev.summary], ['Id', ev.id]]
          .filter(([, v]) => v !== undefined && v !== null && v !== '')
          .map(([k, v]) => [h('dt', null, k), h('dd', null, String(v))])),
      h('h4', null, 'Payload (redacted)'),
      h('pre', { class: 'payload' }, json(ev.payload ?? null)),
      links(ev, app)));
    detail.firstChild.focus();
  }

  load(false);
  return page;
}

function row(ev, open) {
  return h('li', { dataset: { type: ev.type || '', risk: ev.risk || '' } }, h('button', { type: 'button', 'on:click': open },
    h('span', { class: 'muted' }, fmtTime(ev.time)),
    h('span', { class: 'summary' }, h('strong', null, ev.type), ' ', ev.tool ? h('code', null, ev.tool) : '', ' ', ev.summary || ''),
    h('span', null, h('span', { class: 'badge' }, ev.actor), ' ', h('span', { class: ['badge', { high: 'bad', medium: 'warn' }[ev.risk]] }, ev.risk))));
}

// links lists the files and sources an event refers to (its refs): uploads
// open through the authenticated file route, web addresses in a new tab.
function links(ev, app) {
  const refs = Array.isArray(ev.refs) ? ev.refs : [];
  if (refs.length === 0) return null;
  const item = (r) => {
    const label = r.title || r.id;
    if ((r.kind === 'upload' || r.kind === 'file') && r.id) {
      return h('button', { type: 'button', 'on:click': () => download(r.id, r.title).catch((err) => app.toast(`Could not open ${label}: ${err.message}`)) }, icon('clip'), ` ${label}`);
    }
    const href = r.kind === 'url' ? safeHref(r.id) : null;
    return href ? h('a', { href, target: '_blank', rel: 'noopener noreferrer' }, label) : [h('span', { class: 'badge' }, r.kind), ' ', label];
  };
  return h('div', null, h('h4', null, 'Linked files and sources'), h('ul', { class: 'refs' }, refs.map((r) => h('li', null, item(r)))));
}
