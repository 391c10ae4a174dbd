// The System page: GET /system/status (host, gateway and connector status
// and the tool inventory), this device's notifications and its pairing
// controls.

import { h, clear, table, fmtInt, fmtTime } from './dom.js';
import { api, tokens } from './conn.js';
import { controls as notificationControls } from './notifications.js';
import { sections as backgroundSections } from './background.js';
import { controls as speechControls } from './speechsettings.js';

export function render(app) {
  const body = h('div', { 'aria-live': 'polite' });
  const page = h('section', { class: 'page system-page', 'aria-labelledby': 'system-title' },
    h('header', { class: 'view-header' }, h('h2', { id: 'system-title' }, 'System'),
      h('button', { type: 'button', 'on:click': () => load() }, 'Refresh')),
    body, actionSettings(app), notificationControls(app), speechControls(), pairing(app));
  async function load() {
    page.setAttribute('aria-busy', 'true');
    try {
      const s = await api('/system/status');
      clear(body).append(...status(s));
      page.dataset.loaded = '1';
    } catch (err) {
      clear(body).append(h('p', { class: 'error', role: 'alert' }, `Could not load the status: ${err.message}`));
    }
    page.removeAttribute('aria-busy');
  }
  load();
  return page;
}

function service(s) {
  return h('div', { class: 'stat service', dataset: { name: s.name, state: s.state } },
    h('div', { class: 'value' }, h('span', { class: `status-${s.state}`, 'aria-hidden': 'true' }, '● '), s.name),
    h('div', { class: 'label' }, h('strong', { class: `status-${s.state}` }, s.state), s.detail ? ` — ${s.detail}` : ''));
}

function status(s) {
  const decisionClass = { allow: 'ok', gate: 'warn', deny: 'bad' };
  return [
    h('h3', null, 'Services'),
    h('div', { class: 'services' }, [s.host, ...(s.services || [])].filter(Boolean).map(service)),
    ...backgroundSections(s),
    h('h3', null, 'Tools'),
    table(`Tool inventory (${(s.tools || []).length})`, [
      { label: 'Tool', get: (t) => h('code', null, t.name) },
      { label: 'Source', get: (t) => (t.available === false ? [t.source, ' ', h('span', { class: 'badge warn', dataset: { unavailable: '1' } }, 'unavailable')] : t.source) },
      { label: 'Policy', get: (t) => h('span', { class: ['badge', decisionClass[t.decision]] }, t.decision) },
      { label: 'Calls', get: (t) => fmtInt(t.calls), num: true },
      { label: 'Errors', get: (t) => fmtInt(t.errors), num: true },
      { label: 'Last result', get: (t) => (t.lastAt ? [h('span', { class: t.lastOk ? 'status-ok' : 'status-error' }, t.lastOk ? 'ok' : 'error'),
        ` ${fmtTime(t.lastAt)}`, t.lastError ? h('div', { class: 'muted small' }, t.lastError) : null] : h('span', { class: 'muted' }, 'never called')) },
    ], s.tools, 'No tools are loaded.'),
    h('p', { class: 'muted small' }, `Snapshot taken ${fmtTime(s.generatedAt)}.`),
  ];
}

function pairing(app) {
  const box = h('div', { class: 'pairing' });
  const draw = () => {
    const reveal = h('pre', { class: 'token', hidden: true });
    const input = h('input', { id: 'replace-token', type: 'password', autocomplete: 'off' });
    clear(box).append(
      h('h3', null, 'Pairing'),
      h('p', null, tokens.get() ? 'This browser is paired with the host.' : 'This browser is not paired.'),
      h('div', { class: 'actions' },
        h('button', { type: 'button', 'on:click': () => {
          reveal.textContent = tokens.get();
          reveal.hidden = !reveal.hidden;
        } }, 'Show token to pair another device'),
        h('button', { type: 'button', class: 'danger', 'on:click': () => {
          tokens.clear();
          app.conn.stop();
          app.showPairing('This browser forgot the token.');
        } }, 'Forget the token on this device')),
      reveal,
      h('form', { class: 'inline-form', 'on:submit': (e) => {
        e.preventDefault();
        if (!input.value.trim()) return;
        tokens.set(input.value);
        app.conn.start();
        draw();
      } }, h('label', { for: 'replace-token' }, 'Replace token'), input, h('button', { type: 'submit' }, 'Save')),
      h('p', { class: 'muted small' }, 'The token is kept in this browser’s local storage and sent only in the WebSocket’s first frame and the Authorization header, never in a URL.'),
      phone);
    loadPhone();
  };
  const phone = h('div', { class: 'pair-phone' });
  async function loadPhone() {
    let p;
    try {
      p = await api('/system/pairing');
    } catch (err) {
      clear(phone).append(h('p', { class: 'error' }, `Could not load the pairing code: ${err.message}`));
      return;
    }
    const https = p.url.startsWith('https://');
    clear(phone).append(
      h('h4', null, 'Pair a phone'),
      https
        ? h('p', null, 'Scan this code with the phone’s camera, or open ', h('code', null, p.url), ' and enter the token. The code holds the token: do not share it.')
        : h('p', { class: 'muted' }, 'Steward answers only on this computer. Set STEWARD_TLS_CERT and STEWARD_TLS_KEY (for example a Tailscale certificate) and restart to reach it from a phone.'),
      https ? h('img', { class: 'pair-qr', alt: `Pairing code for ${p.url}`, width: 240, height: 240,
        src: `data:image/svg+xml;charset=utf-8,${encodeURIComponent(p.qrSvg)}` }) : null,
      p.rotatable ? h('button', { type: 'button', class: 'danger', 'on:click': rotate }, 'Rotate the token (unpairs every other device)') : null);
  }
  async function rotate() {
    if (!confirm('Replace the host token? Every other device is disconnected and must pair again.')) return;
    try {
      const r = await api('/system/token', { method: 'POST' });
      tokens.set(r.token);
      app.conn.stop();
      app.conn.start();
      app.toast(`Token rotated; ${r.disconnected} connection(s) closed.`);
      draw();
    } catch (err) {
      app.toast(`Could not rotate the token: ${err.message}`);
    }
  }
  draw();
  return box;
}

// actionSettings switches Action Center generation (mail and calendar, or
// calendar only) and its display language: POST /settings/actions, a direct
// user setting. Existing items stay available whatever the switches say.
function actionSettings(app) {
  const box = h('div', { class: 'action-settings' }, h('h3', null, 'Action Center'));
  const note = h('p', { class: 'muted small', 'aria-live': 'polite' });
  const save = async (patch) => {
    try {
      draw(await api('/settings/actions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(patch) }));
      note.textContent = 'Saved.';
    } catch (err) {
      note.textContent = '';
      app.toast(`Could not save the Action Center settings: ${err.message}`);
    }
  };
  const draw = (st) => {
    box.dataset.enabled = String(st.enabled);
    box.dataset.calendarEnabled = String(st.calendarEnabled);
    box.dataset.textLanguage = st.textLanguage;
    const check = (id, key, label) => h('label', { class: 'toggle', for: id },
      h('input', { type: 'checkbox', id, checked: !!st[key], 'on:change': (e) => save({ [key]: e.target.checked }) }), ` ${label}`);
    const lang = h('select', { id: 'actions-language', 'on:change': (e) => save({ textLanguage: e.target.value }) },
      ...[['default', 'Automatic'], ['en', 'English'], ['it', 'Italiano']].map(([v, l]) => h('option', { value: v, selected: st.textLanguage === v }, l)));
    clear(box).append(h('h3', null, 'Action Center'),
      check('actions-enabled', 'enabled', 'Generate actions from mail and calendar'),
      check('actions-calendar-enabled', 'calendarEnabled', 'Calendar reminders'),
      h('div', null, h('label', { for: 'actions-language' }, 'Language of new action texts '), lang),
      st.enabledAt ? h('p', { class: 'muted small' }, `Mail considered since ${fmtTime(st.enabledAt * 1000)}.`) : null,
      note);
  };
  api('/settings/actions').then(draw, () => box.append(h('p', { class: 'muted small' }, 'The Action Center settings are not available.')));
  return box;
}
