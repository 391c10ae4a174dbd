// Conversation rendering shared by the Analyst panel, card Conversations
// and the session route. A tool call and its result render once, at the
// call; a result recorded later (not right after its call) says so. A call
// without a result shows "No result recorded" — never inferred success.
import { h, json, jsonText, markdown } from './dom.js';
import { imagePreview } from './image.js';

function content(row) {
  if (row.content && typeof row.content === 'object') return row.content;
  return {};
}

// images lists a result's recorded image occurrences; each button opens
// the preview (metadata only until then).
function images(res, rc, sessionId, segment) {
  if (!rc?.images?.length || !sessionId || !segment) return null;
  return h('div', { class: 'images' }, rc.images.map((img, index) => {
    const b = h('button', { type: 'button', class: 'image-occurrence', dataset: { row: res.id, index } },
      `Image ${index + 1} · ${img.width}×${img.height}`);
    b.addEventListener('click', () => imagePreview({ sessionId, segment, row: res.id, index, width: img.width, height: img.height, opener: b }));
    return b;
  }));
}

export function renderRows(rows, { sessionId, segment } = {}) {
  const out = [];
  const results = new Map();
  rows.forEach((r, i) => { if (r.kind === 'tool_result') results.set(r.call_id, i); });
  rows.forEach((r, i) => {
    const c = content(r);
    switch (r.kind) {
      case 'user':
        out.push(h('div', { class: 'msg user', dataset: { row: r.id } }, h('div', { class: 'who' }, 'User'), markdown(c.text)));
        break;
      case 'assistant':
        if (!c.text && !c.reasoning) break;
        out.push(h('div', { class: 'msg assistant', dataset: { row: r.id } },
          h('div', { class: 'who' }, 'Assistant'),
          c.reasoning ? h('details', { class: 'reasoning' }, h('summary', {}, 'Reasoning'), h('pre', {}, c.reasoning)) : null,
          markdown(c.text)));
        break;
      case 'tool_call': {
        const ri = results.get(r.call_id);
        const res = ri === undefined ? null : rows[ri];
        const rc = res ? content(res) : null;
        let state = 'No result recorded';
        if (rc) state = rc.is_error ? 'failed' : 'returned';
        const later = ri !== undefined && ri !== i + 1 && rows.slice(i + 1, ri).some((x) => x.kind !== 'tool_call');
        out.push(h('details', { class: `tool ${rc ? (rc.is_error ? 'failed' : 'ok') : 'pending'}`, dataset: { row: r.id, call: r.call_id, tool: r.name } },
          h('summary', {}, h('span', { class: 'tool-name' }, r.name), ' ', h('span', { class: 'tool-state' }, state),
            later ? h('span', { class: 'provenance' }, ` · result recorded later (row ${ri + 1})`) : null),
          h('div', { class: 'tool-body' },
            h('div', { class: 'label' }, 'Request'), jsonText(c.arguments ?? ''),
            h('div', { class: 'label' }, 'Result'),
            rc ? jsonText(rc.content ?? '') : h('p', { class: 'muted' }, 'No result recorded.'),
            images(res, rc, sessionId, segment))));
        break;
      }
      case 'tool_result':
        if (!rows.some((x) => x.kind === 'tool_call' && x.call_id === r.call_id)) {
          out.push(h('div', { class: 'msg orphan' }, h('div', { class: 'who' }, `Result of ${r.name} (call not in this segment)`), jsonText(content(r).content ?? '')));
        }
        break;
      case 'summary':
        out.push(h('details', { class: 'msg summary' }, h('summary', {}, 'Summary of the earlier conversation'), markdown(c.text)));
        break;
      case 'marker': {
        const label = c.type === 'notice' ? `Notice: ${c.text}` : [c.type, c.node, c.outcome, c.text].filter(Boolean).join(' · ');
        out.push(h('div', { class: `marker marker-${c.type || 'other'}` }, label));
        break;
      }
      default:
        out.push(h('div', { class: 'msg unknown' }, `Unknown row kind ${r.kind}`, json(r)));
    }
  });
  if (!out.length) out.push(h('p', { class: 'muted empty' }, sessionId ? `No rows in ${sessionId} yet.` : 'No rows yet.'));
  return out;
}
