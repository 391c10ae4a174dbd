// The Usage page: GET /usage?period=… (steward/usage.Report) as totals,
// breakdowns, a cost-by-day chart, tool timings and the latest calls.

import { h, svg, clear, table, fmtUSD, fmtInt, fmtMs, fmtTime } from './dom.js';
import { api } from './conn.js';

const PERIODS = [['7d', '7 days'], ['30d', '30 days'], ['all', 'All time']];
const tokensOf = (t) => (t ? t.input + t.output + t.cacheRead + t.cacheWrite : 0);

export function render(app) {
  let period = sessionStorage.getItem('steward.usage.period') || '7d';
  const body = h('div', { 'aria-live': 'polite' });
  const buttons = PERIODS.map(([p, label]) => h('button', { type: 'button', dataset: { period: p },
    'on:click': () => {
      period = p;
      sessionStorage.setItem('steward.usage.period', p);
      load();
    } }, label));
  const page = h('section', { class: 'page usage-page', 'aria-labelledby': 'usage-title' },
    h('header', { class: 'view-header' }, h('h2', { id: 'usage-title' }, 'Usage & cost'),
      h('div', { class: 'segmented', role: 'group', 'aria-label': 'Period' }, buttons)),
    body);
  async function load() {
    for (const b of buttons) b.setAttribute('aria-pressed', String(b.dataset.period === period));
    page.setAttribute('aria-busy', 'true');
    try {
      const rep = await api(`/usage?period=${period}`);
      clear(body).append(...report(rep));
      page.dataset.loaded = period;
    } catch (err) {
      clear(body).append(h('p', { class: 'error', role: 'alert' }, `Could not load usage: ${err.message}`));
    }
    page.removeAttribute('aria-busy');
  }
  load();
  return page;
}

function stat(label, value, cls) {
  return h('div', { class: ['stat', cls] }, h('div', { class: 'value' }, value), h('div', { class: 'label' }, label));
}

function report(r) {
  const t = r.total;
  const unl = r.unlabelled || {};
  const groupCols = (keyLabel) => [
    { label: keyLabel, get: (g) => g.key },
    { label: 'Requests', get: (g) => fmtInt(g.requests), num: true },
    { label: 'Errors', get: (g) => fmtInt(g.errors), num: true },
    { label: 'Tokens', get: (g) => fmtInt(tokensOf(g.tokens)), num: true },
    { label: 'Cost', get: (g) => fmtUSD(g.costUsd), num: true },
  ];
  const tt = r.byTokenType || {};
  return [
    h('div', { class: 'stats' },
      stat('Total cost (estimate)', fmtUSD(t.costUsd)),
      stat('Requests', fmtInt(t.requests)),
      stat('Errors', fmtInt(t.errors)),
      stat('Input tokens', fmtInt(t.tokens.input)),
      stat('Output tokens', fmtInt(t.tokens.output)),
      stat('Cache read / write', `${fmtInt(t.tokens.cacheRead)} / ${fmtInt(t.tokens.cacheWrite)}`)),
    unl.requests > 0
      ? h('p', { class: 'callout unlabelled', role: 'note' }, h('strong', null, 'Unlabelled spend: '),
        `${fmtUSD(unl.costUsd)} in ${fmtInt(unl.requests)} request${unl.requests === 1 ? '' : 's'} recorded as “unknown” — a caller did not send x-usage-service / x-usage-action.`)
      : h('p', { class: 'muted unlabelled' }, 'No unlabelled (“unknown”) spend in this period.'),
    h('h3', null, 'Cost by day'),
    chart(r.byDay || []),
    h('div', { class: 'grid2' },
      table('By service', groupCols('Service'), r.byService),
      table('By action', groupCols('Service / action'), r.byAction)),
    h('div', { class: 'grid2' },
      table('By model', [
        { label: 'Tier', get: (g) => g.public || g.key },
        { label: 'Upstream model', get: (g) => (g.public && g.key !== g.public ? g.key : h('span', { class: 'muted' }, 'none answered')) },
        ...groupCols('').slice(1)], r.byModel),
      table('By token type', [{ label: 'Token type', get: (x) => x[0] }, { label: 'Cost', get: (x) => fmtUSD(x[1]), num: true }],
        [['Input', tt.input], ['Output', tt.output], ['Cache read', tt.cacheRead], ['Cache write', tt.cacheWrite]])),
    table('By day', groupCols('Day'), [...(r.byDay || [])].reverse()),
    h('h3', null, 'Tools'),
    table('Tool calls', [
      { label: 'Tool', get: (x) => h('code', null, x.tool) },
      { label: 'Calls', get: (x) => fmtInt(x.calls), num: true },
      { label: 'Errors', get: (x) => fmtInt(x.errors), num: true },
      { label: 'Average', get: (x) => fmtMs(x.avgMs), num: true },
      { label: 'Max', get: (x) => fmtMs(x.maxMs), num: true },
      { label: 'Total', get: (x) => fmtMs(x.totalMs), num: true },
    ], r.tools, 'No tool calls in this period.'),
    h('h3', null, 'Recent calls'),
    table('Most recent model requests', [
      { label: 'Time', get: (x) => fmtTime(x.time) },
      { label: 'Service / action', get: (x) => `${x.service}/${x.action}` },
      { label: 'Model', get: (x) => x.upstream || x.model },
      { label: 'Outcome', get: (x) => h('span', { class: ['badge', x.outcome === 'ok' ? 'ok' : 'bad'] }, x.outcome) },
      { label: 'Tokens', get: (x) => fmtInt(tokensOf(x.tokens)), num: true },
      { label: 'Cost', get: (x) => fmtUSD(x.costUsd), num: true },
      { label: 'Latency', get: (x) => fmtMs(x.latencyMs), num: true },
    ], r.recent, 'No model requests in this period.'),
    h('p', { class: 'muted small' }, 'Costs are estimates from recorded tokens and the gateway’s rates table, not a provider invoice.'),
  ];
}

// niceCeil rounds a positive amount up to 1, 2 or 5 × 10^k, so the axis
// reads a round figure however small the costs are.
function niceCeil(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((n) => n >= v * (1 - 1e-9));
}

// chart draws cost by day as an inline SVG bar chart, drawn at the width
// it is shown at so that its labels keep their size on a phone.
function chart(days) {
  if (days.length === 0) return h('p', { class: 'muted' }, 'No requests in this period.');
  const W = Math.round(Math.min(720, Math.max(280, document.documentElement.clientWidth - 40)));
  const H = W < 480 ? 160 : 180;
  const pad = { l: 58, r: 8, t: 12, b: 26 };
  const top = Math.max(...days.map((d) => d.costUsd), 0);
  const max = top > 0 ? niceCeil(top) : 0;
  const slot = (W - pad.l - pad.r) / days.length;
  const bw = Math.min(slot, 48);
  const y = (v) => pad.t + (H - pad.t - pad.b) * (1 - (max > 0 ? v / max : 0));
  const every = Math.ceil(days.length / Math.max(1, Math.floor((W - pad.l - pad.r) / 44))); // a label needs ~44 px
  const ticks = max > 0 ? [0, max / 2, max] : [0];
  return svg('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `Cost by day, ${days.length} days, highest ${fmtUSD(top)}` },
    ticks.map((v) => [
      svg('line', { class: v === 0 ? 'axis' : 'grid', x1: pad.l, x2: W - pad.r, y1: y(v), y2: y(v) }),
      svg('text', { class: 'tick', x: pad.l - 6, y: y(v) + 4, 'text-anchor': 'end' }, fmtUSD(v)),
    ]),
    days.map((d, i) => {
      const x = pad.l + i * slot + (slot - bw) / 2;
      const barTop = y(d.costUsd);
      return [
        svg('rect', { class: 'bar', x: x + bw * 0.15, y: barTop, width: Math.max(bw * 0.7, 1), height: Math.max(H - pad.b - barTop, d.costUsd > 0 ? 1 : 0) },
          svg('title', null, `${d.key}: ${fmtUSD(d.costUsd)}, ${fmtInt(d.requests)} requests`)),
        i % every === 0 ? svg('text', { class: 'day', x: x + bw / 2, y: H - 8, 'text-anchor': 'middle' }, d.key.slice(5)) : null,
      ];
    }));
}
