// Tool, rich-result, approval and question cards. Everything shown comes from
// the protocol frames; the decisions are the host's.

import { h, clear, fmtBytes, fmtMs, fmtTime, json, icon } from './dom.js';
import { api, download } from './conn.js';

const STATUS_LABEL = {
  running: 'running', done: 'done', error: 'failed', blocked: 'not done',
};

// toolCard renders a tool card: collapsed details with inputs, the effective
// input, output and errors; a rich card above them for a documented kind.
export function toolCard(card) {
  const el = h('article', { class: 'card tool-card', dataset: { callId: card.callId || '' } });
  updateToolCard(el, card);
  return el;
}

export function updateToolCard(el, card) {
  const status = card.status || 'running';
  el.className = `card tool-card status-${status}`;
  el.dataset.status = status;
  const open = el.querySelector('details')?.open || false;
  const details = h('details', { open },
    h('summary', null,
      icon(status === 'running' ? 'clock' : status === 'done' ? 'check' : 'alert'),
      h('span', { class: 'tool-name' }, card.name || 'tool'),
      h('span', { class: 'badge', dataset: { status } }, STATUS_LABEL[status] || status),
      card.durationMs ? h('span', { class: 'muted duration' }, fmtMs(card.durationMs)) : null),
    section('Input', card.args),
    card.effectiveArgs ? section('Ran with (edited)', card.effectiveArgs) : null,
    card.content ? h('div', { class: 'card-section' }, h('h4', null, 'Output'), h('pre', { class: 'output' }, card.content)) : null,
    card.error ? h('div', { class: 'card-section error' }, h('h4', null, 'Error'), h('pre', null, card.error)) : null);
  const rich = card.data ? richCard(card.data) : null;
  clear(el).append(...[rich, details].filter(Boolean));
}

function section(title, value) {
  if (value === undefined || value === null) return null;
  return h('div', { class: 'card-section' }, h('h4', null, title), h('pre', null, typeof value === 'string' ? value : json(value)));
}

// richCard renders the documented kinds (docs/protocol.md "Rich tool
// results"); an unknown kind renders nothing and the raw output stays below.
export function richCard(data) {
  if (!data || typeof data !== 'object') return null;
  // MCP connectors' results arrive as {content, structuredContent}.
  if (!data.kind && data.structuredContent && typeof data.structuredContent === 'object') data = data.structuredContent;
  const r = RICH[data.kind];
  return r ? h('div', { class: `rich rich-${data.kind}` }, r(data)) : null;
}

const str = (v) => (typeof v === 'string' ? v : v === undefined || v === null ? '' : String(v));
const list = (v) => (Array.isArray(v) ? v.map(str).join(', ') : str(v));

// Card actions. Files open through the host's file token registry (the
// host adds "token" for files a built-in connector found), never by path.
const openFile = (d) => (d.token
  ? h('button', { type: 'button', class: 'card-action', dataset: { token: d.token }, 'on:click': () => download(d.token, str(d.name)).catch(() => {}) }, icon('file'), ' Open')
  : null);
const MAIL_LINK = /^message:/i;
const openMail = (d) => (typeof d.mailUrl === 'string' && MAIL_LINK.test(d.mailUrl)
  ? h('a', { class: 'card-action', href: d.mailUrl }, icon('mail'), ' Open in Mail')
  : null);
const copyButton = (label, text) => h('button', { type: 'button', class: 'card-action', 'on:click': (e) => {
  const b = e.currentTarget;
  navigator.clipboard?.writeText(text).then(() => { b.textContent = 'Copied'; }, () => { b.textContent = 'Copy failed'; });
} }, icon('clip'), ` ${label}`);
const actions = (...items) => {
  const kept = items.filter(Boolean);
  return kept.length ? h('div', { class: 'card-actions' }, kept) : null;
};
// localTime shows an instant in the browser's zone, naming the zone.
const localTime = (t) => {
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return str(t);
  return d.toLocaleString(undefined, { weekday: 'short', year: 'numeric', month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit', timeZoneName: 'short' });
};

const RICH = {
  email: (d) => h('div', { class: 'rich-item' },
    h('div', { class: 'rich-title' }, icon('mail'), ' ', str(d.subject) || '(no subject)'),
    h('div', { class: 'muted' }, str(d.from || d.sender), d.to ? ` → ${list(d.to)}` : '', d.date ? ` · ${fmtTime(d.date)}` : '',
      d.mailbox ? ` · ${str(d.mailbox)}` : '',
      d.hasAttachments || (Array.isArray(d.attachments) && d.attachments.length) ? [' · ', icon('clip', 'has attachments')] : ''),
    d.snippet || d.body ? h('p', { class: 'snippet' }, str(d.snippet || d.body).slice(0, 400)) : null,
    actions(openMail(d))),
  file: (d) => h('div', { class: 'rich-item' },
    h('div', { class: 'rich-title' }, icon('file'), ' ', str(d.name) || str(d.path)),
    h('div', { class: 'muted' }, str(d.path), d.size !== undefined ? ` · ${fmtBytes(d.size)}` : '', d.modified ? ` · ${fmtTime(d.modified)}` : '',
      d.pages ? ` · ${d.pages} page${d.pages === 1 ? '' : 's'}` : ''),
    d.snippet ? h('p', { class: 'snippet' }, str(d.snippet)) : null,
    actions(openFile(d))),
  event: (d) => h('div', { class: 'rich-item' },
    h('div', { class: 'rich-title' }, icon('calendar'), ' ', str(d.title) || '(untitled event)'),
    h('div', { class: 'muted event-time' }, d.allDay ? `${fmtDay(d.startDate || d.start)} (all day)` : `${localTime(d.start)} – ${localTime(d.end)}`,
      d.location ? ` · ${str(d.location)}` : '', d.calendar ? ` · ${str(d.calendar)}` : '')),
  contact: (d) => h('div', { class: 'rich-item' },
    h('div', { class: 'rich-title' }, icon('user'), ' ', str(d.name) || '(no name)'),
    h('div', { class: 'muted' }, [d.title, d.organization].filter(Boolean).map(str).join(', ')),
    actions(
      ...(Array.isArray(d.emails) ? d.emails : []).slice(0, 3).map((e) => h('a', { class: 'card-action', href: `mailto:${encodeURIComponent(str(e.value))}` }, icon('mail'), ` ${str(e.value)}`)),
      ...(Array.isArray(d.phones) ? d.phones : []).slice(0, 3).map((p) => h('a', { class: 'card-action', href: `tel:${str(p.value).replace(/[^\d+]/g, '')}` }, ` ${str(p.value)}`)))),
  train: (d) => {
    const t = d.train;
    if (!t || typeof t !== 'object') return h('div', { class: 'rich-item muted' }, str(d.message));
    const info = t.train || {};
    const name = [info.category, info.number].filter(Boolean).join(' ');
    const platform = t.platform ? `platform ${str(t.platform)}${t.platformStatus === 'scheduled' ? ' (scheduled, not confirmed)' : ''}` : 'platform not announced';
    const dep = t.estimatedDeparture || t.scheduledDeparture;
    return h('div', { class: 'rich-item' },
      h('div', { class: 'rich-title' }, icon('train'), ' ', name || 'Train', ` ${str(t.from?.name)} → ${str(t.to?.name)}`),
      h('div', { class: 'muted' }, dep ? `departs ${localTime(dep)}` : '', t.delayMinutes ? ` · ${t.delayMinutes} min late` : '',
        t.cancelled ? ' · cancelled' : '', ` · ${platform}`),
      actions(copyButton('Copy platform and train', `${name}, ${platform}, ${str(t.from?.name)} → ${str(t.to?.name)}${dep ? `, ${localTime(dep)}` : ''}`)));
  },
  write_operation: (d) => {
    const state = h('span', { class: 'badge writeop-state', dataset: { state: str(d.state) } }, str(d.state));
    const detail = h('div', { class: 'writeop-detail muted' }, str(d.note));
    const link = h('a', { class: 'writeop-link', href: `#writeops/${encodeURIComponent(str(d.operationId))}`, title: 'read_write_operation' },
      `journal ${str(d.operationId)}`);
    link.addEventListener('click', async (ev) => {
      ev.preventDefault();
      try {
        const op = await api(`/writeops/${encodeURIComponent(str(d.operationId))}`);
        state.textContent = str(op.state);
        state.dataset.state = str(op.state);
        detail.textContent = [op.meaning, op.note, op.error].filter(Boolean).join(' · ');
      } catch (err) {
        detail.textContent = `could not read the journal: ${err.message}`;
      }
    });
    return h('div', { class: 'rich-item' },
      h('div', { class: 'rich-title' }, icon('mail'), ' ', str(d.summary) || str(d.operationId), ' ', state),
      d.scheduledFor ? h('div', { class: 'muted' }, `scheduled for ${fmtTime(d.scheduledFor)}`) : null,
      detail, link);
  },
  search_results: (d) => {
    const items = [d.items, d.messages, d.events, d.contacts, d.files].find(Array.isArray) || [];
    return h('div', null,
      h('div', { class: 'muted' }, `${items.length} result${items.length === 1 ? '' : 's'}`, d.query ? ` for “${str(d.query)}”` : ''),
      items.slice(0, 20).map((it) => (it && RICH[it.kind] && it.kind !== 'search_results' ? RICH[it.kind](it) : null)));
  },
};

function fmtDay(t) {
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? str(t) : d.toLocaleDateString();
}

const VERDICT_TEXT = {
  approved: 'Approved', denied: 'Denied', revise: 'Revision requested', timeout: 'Timed out: not done',
  no_channel: 'No app was connected: not done', expired: 'No longer pending (the host restarted): not done',
};

// approvalCard renders a gated call. req is an approval.request frame (with
// schema) while pending, or the transcript's approval entry afterwards.
// respond(decision, {args, note}) sends approval.respond.
export function approvalCard(req, { pending, respond }) {
  if (req.tool === FLOW_TOOL) return flowCard(req, { pending, respond });
  const el = h('article', { class: 'card approval-card', dataset: { approvalId: req.approvalId, callId: req.callId || '' },
    'aria-label': `Approval for ${req.tool}` });
  const body = h('div', { class: 'approval-body' });
  const outcome = h('p', { class: 'outcome', role: 'status' });
  el.append(
    h('header', null, icon('shield'), ' ', h('strong', null, 'Approval needed: '), h('code', null, req.tool)),
    argList(req.args), body, outcome);
  el.setPending = (p) => renderActions(el, body, req, p, respond);
  el.setPending(pending);
  return el;
}

function argList(args) {
  let obj = args;
  if (typeof obj === 'string') {
    try {
      obj = JSON.parse(obj);
    } catch { /* shown raw */ }
  }
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return h('pre', { class: 'args' }, json(obj));
  return h('dl', { class: 'args' }, Object.entries(obj).map(([k, v]) => [h('dt', null, k), h('dd', null, typeof v === 'string' ? v : json(v))]));
}

// noteOpener returns a click handler that replaces body with a note form
// for a deny or revise decision; Cancel calls back.
function noteOpener(body, respond, back) {
  return (decision, label, placeholder) => () => {
    const ta = h('textarea', { rows: 2, placeholder, 'aria-label': `Note for ${label.toLowerCase()}` });
    const form = h('form', { class: 'note-form', 'on:submit': (e) => {
      e.preventDefault();
      respond(decision, { note: ta.value.trim() });
    } }, ta, h('div', { class: 'actions' },
      h('button', { type: 'submit', class: decision === 'deny' ? 'danger' : 'primary' }, label),
      h('button', { type: 'button', 'on:click': back }, 'Cancel')));
    clear(body).append(form);
    ta.focus();
  };
}

function renderActions(el, body, req, pending, respond) {
  clear(body);
  el.dataset.state = pending ? 'pending' : 'resolved';
  if (!pending) return;
  const note = noteOpener(body, respond, () => renderActions(el, body, req, true, respond));
  body.append(h('div', { class: 'actions' },
    h('button', { type: 'button', class: 'primary', 'on:click': () => respond('approve', {}) }, 'Approve'),
    h('button', { type: 'button', 'on:click': () => clear(body).append(editForm(req, respond, () => renderActions(el, body, req, true, respond))) }, 'Edit…'),
    h('button', { type: 'button', class: 'danger', 'on:click': note('deny', 'Deny', 'Why not? (optional)') }, 'Deny…'),
    h('button', { type: 'button', 'on:click': note('revise', 'Request revision', 'What should change?') }, 'Request revision…')),
  req.expiresAt ? h('p', { class: 'muted small' }, `Expires ${fmtTime(req.expiresAt)}`) : null);
}

// resolveApprovalCard shows a verdict on a card.
export function resolveApprovalCard(el, verdict, { args, note } = {}) {
  if (!el) return;
  el.setPending?.(false);
  el.dataset.verdict = verdict;
  const out = el.querySelector('.outcome');
  clear(out).append(h('strong', null, VERDICT_TEXT[verdict] || verdict),
    note ? ` — “${note}”` : '',
    args && Object.keys(args).length ? h('span', { class: 'muted' }, ' with edits') : '');
}

// showEffective records on an approval card the input the tool actually ran with.
export function showEffective(el, effectiveArgs) {
  if (!el || !effectiveArgs) return;
  el.querySelector('.effective')?.remove();
  el.append(h('div', { class: 'card-section effective' }, h('h4', null, 'Ran with'), argList(effectiveArgs)));
}

// editForm is one field per argument, typed by the tool's JSON schema.
// Optional fields left empty are sent as null, which the host drops: they
// stay absent instead of becoming invented empty values.
function editForm(req, respond, cancel) {
  const schema = (req.schema && typeof req.schema === 'object') ? req.schema : {};
  const props = (schema.properties && typeof schema.properties === 'object') ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const args = (req.args && typeof req.args === 'object') ? req.args : {};
  const keys = [...Object.keys(props), ...Object.keys(args).filter((k) => !(k in props))];
  const fields = keys.map((k) => field(k, props[k] || {}, args[k], required.has(k), req.approvalId));
  const error = h('p', { class: 'error', role: 'alert' });
  const form = h('form', { class: 'edit-form', 'on:submit': (e) => {
    e.preventDefault();
    const out = {};
    try {
      for (const f of fields) out[f.key] = f.read();
    } catch (err) {
      error.textContent = err.message;
      return;
    }
    respond('approve', { args: out });
  } }, fields.map((f) => f.el), error,
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary' }, 'Approve with edits'),
    h('button', { type: 'button', 'on:click': cancel }, 'Cancel')));
  return form;
}

const LONG_TEXT = /^(body|text|content|description|notes?|message|markdown|html)$/i;

function field(key, prop, value, required, approvalId) {
  const id = `f-${approvalId}-${key}`.replace(/[^\w-]/g, '_');
  const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== 'null') : prop.type;
  const labelText = [prop.title || key, required ? ' (required)' : ' (optional)'];
  let input;
  let read;
  const empty = (s) => s === '';
  const absent = () => {
    if (required) throw new Error(`${key} is required`);
    return null;
  };
  if (Array.isArray(prop.enum)) {
    input = h('select', { id, name: key },
      required ? null : h('option', { value: '' }, '—'),
      prop.enum.map((v) => h('option', { value: JSON.stringify(v) }, String(v))));
    input.value = value === undefined ? '' : JSON.stringify(value);
    read = () => (empty(input.value) ? absent() : JSON.parse(input.value));
  } else if (type === 'boolean') {
    input = h('select', { id, name: key }, required ? null : h('option', { value: '' }, '—'),
      h('option', { value: 'true' }, 'yes'), h('option', { value: 'false' }, 'no'));
    input.value = value === undefined ? (required ? 'false' : '') : String(Boolean(value));
    read = () => (empty(input.value) ? absent() : input.value === 'true');
  } else if (type === 'integer' || type === 'number') {
    input = h('input', { id, name: key, type: 'number', step: type === 'integer' ? '1' : 'any', inputmode: 'decimal' });
    input.value = value === undefined || value === null ? '' : String(value);
    read = () => {
      if (empty(input.value.trim())) return absent();
      const n = Number(input.value);
      if (!Number.isFinite(n) || (type === 'integer' && !Number.isInteger(n))) throw new Error(`${key} must be ${type === 'integer' ? 'a whole number' : 'a number'}`);
      return n;
    };
  } else if (type === 'string' || (type === undefined && (value === undefined || typeof value === 'string'))) {
    const text = value === undefined || value === null ? '' : String(value);
    const long = LONG_TEXT.test(key) || text.includes('\n') || text.length > 80 || prop.format === 'textarea';
    input = long ? h('textarea', { id, name: key, rows: Math.min(10, Math.max(3, text.split('\n').length + 1)) }) : h('input', { id, name: key, type: 'text' });
    input.value = text;
    read = () => (empty(input.value) ? (required ? '' : null) : input.value);
  } else {
    // arrays, objects and untyped values are edited as JSON.
    input = h('textarea', { id, name: key, rows: 3, class: 'mono' });
    input.value = value === undefined ? '' : JSON.stringify(value, null, 2);
    read = () => {
      if (empty(input.value.trim())) return absent();
      try {
        return JSON.parse(input.value);
      } catch {
        throw new Error(`${key} must be valid JSON`);
      }
    };
  }
  if (required) input.required = type !== 'string';
  const el = h('div', { class: 'field' },
    h('label', { for: id }, labelText),
    input,
    prop.description ? h('small', { class: 'muted' }, prop.description) : null);
  return { key, el, read };
}

// FLOW_TOOL is the Action Center's create_flow as the agent names it.
const FLOW_TOOL = 'mcp__actions__create_flow';

const FLOW_FIELDS = [
  { key: 'name', label: 'Name', required: true, hint: 'A short name you will recognise in the flow list.' },
  { key: 'trigger', label: 'Triggering situation', required: true, long: true, hint: 'When this applies, e.g. “a purchase confirmation from a shop”.' },
  { key: 'guidance', label: 'Guidance', required: true, long: true, hint: 'What Steward should propose when it applies.' },
  { key: 'exclusions', label: 'Exclusions', long: true, hint: 'When it must not apply (optional).' },
];

// flowCard is create_flow's dedicated approval: the user reads and edits the
// procedure's name, triggering situation, guidance and exclusions, then saves
// it (approve with the edited fields) or declines. Nothing is saved before.
function flowCard(req, { pending, respond }) {
  let args = (req.args && typeof req.args === 'object') ? req.args : {};
  if (typeof req.args === 'string') {
    try {
      args = JSON.parse(req.args);
    } catch { /* shown empty */ }
  }
  const el = h('article', { class: 'card approval-card flow-card', dataset: { approvalId: req.approvalId, callId: req.callId || '' },
    'aria-label': 'Approval for a new flow' });
  const body = h('div', { class: 'approval-body' });
  const outcome = h('p', { class: 'outcome', role: 'status' });
  el.append(h('header', null, icon('shield'), ' ', h('strong', null, 'Save this flow?')),
    h('p', { class: 'muted small' }, 'A flow guides future Action Center proposals when its situation comes up again. ' +
      'It never sends or changes anything by itself: every step it suggests still asks you.'),
    body, outcome);
  const render = (p) => {
    clear(body);
    el.dataset.state = p ? 'pending' : 'resolved';
    if (!p) {
      body.append(h('dl', { class: 'args flow-fields' }, FLOW_FIELDS.map((f) => [h('dt', null, f.label), h('dd', { dataset: { field: f.key } }, args[f.key] || '—')])));
      return;
    }
    const inputs = FLOW_FIELDS.map((f) => {
      const id = `flow-${req.approvalId}-${f.key}`.replace(/[^\w-]/g, '_');
      const input = f.long ? h('textarea', { id, name: f.key, rows: 3 }) : h('input', { id, name: f.key, type: 'text' });
      input.value = typeof args[f.key] === 'string' ? args[f.key] : '';
      return { f, input, el: h('div', { class: 'field' }, h('label', { for: id }, f.label, f.required ? '' : ' (optional)'), input, h('small', { class: 'muted' }, f.hint)) };
    });
    const error = h('p', { class: 'error', role: 'alert' });
    const note = noteOpener(body, respond, () => render(true));
    body.append(h('form', { class: 'edit-form flow-form', 'on:input': () => { error.textContent = ''; }, 'on:submit': (e) => {
      e.preventDefault();
      const out = {};
      for (const { f, input } of inputs) {
        const v = input.value.trim();
        if (f.required && !v) {
          error.textContent = `${f.label} is required.`;
          input.focus();
          return;
        }
        out[f.key] = v;
      }
      const edited = FLOW_FIELDS.some(({ key }) => out[key] !== (typeof args[key] === 'string' ? args[key].trim() : ''));
      args = out;
      respond('approve', edited ? { args: out } : {});
    } }, inputs.map((i) => i.el), error,
    h('div', { class: 'actions' },
      h('button', { type: 'submit', class: 'primary' }, 'Save flow'),
      h('button', { type: 'button', class: 'danger', 'on:click': note('deny', 'Don’t save', 'Why not? (optional)') }, 'Don’t save…'),
      h('button', { type: 'button', 'on:click': note('revise', 'Request revision', 'What should change?') }, 'Request revision…'))),
    req.expiresAt ? h('p', { class: 'muted small' }, `Expires ${fmtTime(req.expiresAt)}`) : null);
  };
  el.setPending = render;
  render(pending);
  return el;
}

// questionCard renders an ask_user question with its options and a free answer.
export function questionCard(q, answer) {
  const input = h('input', { type: 'text', 'aria-label': 'Your answer', placeholder: 'Type an answer' });
  const el = h('article', { class: 'card question-card', dataset: { questionId: q.questionId } },
    h('p', null, icon('question'), ' ', q.text),
    h('div', { class: 'actions' }, (q.options || []).map((o) => h('button', { type: 'button', 'on:click': () => answer(o) }, o))),
    h('form', { class: 'inline-form', 'on:submit': (e) => {
      e.preventDefault();
      if (input.value.trim()) answer(input.value.trim());
    } }, input, h('button', { type: 'submit' }, 'Answer')));
  return el;
}

export function answeredQuestion(el, text, prefix = 'Answered: ') {
  if (!el) return;
  el.querySelectorAll('button, input').forEach((b) => { b.disabled = true; });
  el.append(h('p', { class: 'outcome' }, prefix, text));
}
