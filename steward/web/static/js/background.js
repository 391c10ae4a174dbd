// The background plane: the System page's sections for scheduler jobs,
// search preparation, stores and disk (from GET /system/status), and the
// preparation banner the app shows while the host warms search after
// start-up (GET /system/preparation).

import { h, clear, table, fmtInt, fmtMs, fmtTime } from './dom.js';
import { api } from './conn.js';

const stateClass = { ok: 'ok', 'up to date': 'ok', done: 'ok', idle: 'ok', skipped: 'warn', running: 'warn', queued: '', warning: 'warn', timeout: 'bad',
  failed: 'bad', error: 'bad', interrupted: 'warn', unavailable: 'warn', unknown: '', 'not observed': '' };

function badge(state, text = state) {
  return h('span', { class: ['badge', stateClass[state] || ''], dataset: { state } }, text);
}

function fmtSize(n) {
  if (!Number.isFinite(n)) return '';
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(0)} KB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MB`;
  return `${(n / 1024 ** 3).toFixed(1)} GB`;
}

function every(seconds) {
  if (!seconds) return '';
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

// sections returns the background plane's parts of the System page.
export function sections(s) {
  return [scheduler(s.scheduler), preparation(s.preparation), stores(s.stores), disk(s.disk)].flat().filter(Boolean);
}

function lastResult(j) {
  if (j.state === 'unavailable') return h('span', { class: 'muted small' }, j.unavailable);
  if (!j.observed) {
    const earlier = j.earlier ? ` (earlier: ${j.earlier.lastResult}, ${fmtTime(j.earlier.lastEnd)})` : '';
    return h('span', { class: 'muted' }, `not observed in this process${earlier}`);
  }
  return [badge(j.lastResult), j.lastDurationMs ? ` ${fmtMs(j.lastDurationMs)}` : '',
    j.lastError ? h('div', { class: 'muted small job-error' }, j.lastError.split('\n')[0]) : null,
    j.lastDetail ? h('div', { class: 'muted small job-detail' }, j.lastDetail) : null];
}

function scheduler(sc) {
  if (!sc) return null;
  const where = sc.inProcess ? 'run by this host' : 'read from the log of a separate steward scheduler';
  return h('section', { class: 'scheduler', 'aria-labelledby': 'scheduler-title' },
    h('h3', { id: 'scheduler-title' }, 'Background jobs'),
    h('p', { class: 'muted small' }, `Jobs ${where}; log `, h('code', null, sc.log), '.'),
    sc.error ? h('p', { class: 'error' }, sc.error) : null,
    table(`Scheduler jobs (${sc.jobs.length})`, [
      { label: 'Job', get: (j) => [h('strong', null, j.name), h('div', { class: 'muted small' }, `every ${every(j.intervalSeconds)}`)] },
      { label: 'State', get: (j) => badge(j.state) },
      { label: 'Last run', get: (j) => (j.lastStart ? fmtTime(j.lastEnd || j.lastStart) : h('span', { class: 'muted' }, '—')) },
      { label: 'Result', get: lastResult },
      { label: 'Next run', get: (j) => (j.nextRun ? fmtTime(j.nextRun) : h('span', { class: 'muted' }, '—')) },
      { label: 'Skips', get: (j) => fmtInt(j.skips), num: true },
    ], sc.jobs, 'No jobs.'));
}

function preparation(p) {
  if (!p) return null;
  return h('section', { class: 'preparation', 'aria-labelledby': 'preparation-title' },
    h('h3', { id: 'preparation-title' }, 'Search preparation'),
    h('ol', { class: 'prep-tasks' }, p.tasks.map((t) => h('li', { dataset: { task: t.name, state: t.state } },
      badge(t.state), ' ', h('strong', null, t.name),
      t.durationMs ? h('span', { class: 'muted' }, ` ${fmtMs(t.durationMs)}`) : '',
      t.detail ? h('div', { class: 'muted small' }, t.detail) : null,
      t.error ? h('div', { class: 'error small' }, t.error) : null))));
}

function stores(list) {
  if (!list) return null;
  return h('section', { class: 'stores', 'aria-labelledby': 'stores-title' },
    h('h3', { id: 'stores-title' }, 'Stores'),
    table(`SQLite stores (${list.length})`, [
      { label: 'Store', get: (s) => h('strong', null, s.name) },
      { label: 'State', get: (s) => badge(s.state) },
      { label: 'Size', get: (s) => (s.sizeBytes ? fmtSize(s.sizeBytes) : ''), num: true },
      { label: 'Path and detail', get: (s) => [h('code', { class: 'path' }, s.path), s.detail ? h('div', { class: 'muted small' }, s.detail) : null] },
    ], list, 'No stores.'));
}

function disk(d) {
  if (!d) return null;
  return h('section', { class: 'disk', 'aria-labelledby': 'disk-title' },
    h('h3', { id: 'disk-title' }, 'Disk'),
    h('div', { class: 'stat service', dataset: { name: 'disk', state: d.state } },
      h('div', { class: 'value' }, fmtSize(d.freeBytes), ' free'),
      h('div', { class: 'label' }, h('strong', { class: `status-${d.state}` }, d.state), ' — ', d.detail, ' in ', h('code', null, d.path))));
}

const progress = { running: '…', queued: '(queued)', done: '✓', skipped: '(skipped)', failed: '(failed)' };

// startBanner shows the start-up preparation while it runs: one line above
// the page, polled every two seconds, gone once every task has finished
// (failures stay for a while, pointing at the System page).
export function startBanner() {
  const el = h('div', { id: 'prep-banner', class: 'prep-banner', role: 'status', 'aria-live': 'polite', hidden: true });
  document.body.append(el);
  let timer = 0;
  async function poll() {
    let p;
    try {
      p = await api('/system/preparation');
    } catch {
      timer = setTimeout(poll, 10000); // an older host without the route, or offline
      return;
    }
    const failed = p.tasks.filter((t) => t.state === 'failed');
    if (p.state === 'done') {
      if (failed.length === 0) {
        el.hidden = true;
        return;
      }
      clear(el).append(`Search preparation finished with ${failed.length} problem${failed.length > 1 ? 's' : ''}: `,
        h('a', { href: '#/system' }, 'see System'), '.');
      el.hidden = false;
      el.dataset.state = 'failed';
      setTimeout(() => { el.hidden = true; }, 20000);
      return;
    }
    clear(el).append(h('strong', null, 'Preparing search: '),
      ...p.tasks.flatMap((t, i) => [i ? ' · ' : '', h('span', { dataset: { state: t.state } }, `${t.name} ${progress[t.state] || t.state}`)]));
    el.hidden = false;
    el.dataset.state = p.state;
    timer = setTimeout(poll, 2000);
  }
  poll();
  return () => clearTimeout(timer);
}
