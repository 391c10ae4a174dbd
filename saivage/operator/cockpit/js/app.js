// The cockpit shell: sign-in, the runtime store, the live socket and the
// hash router (home, card, session, files, system, debug).
import { auth, call } from './api.js';
import { clear, failure } from './dom.js';
import { Live } from './live.js';
import { homeView } from './home.js';
import { watchNavigation } from './navigation.js';

const main = document.getElementById('main');
const badgeEl = document.getElementById('runtime-badge');
const connEl = document.getElementById('conn-status');
const signin = document.getElementById('signin');

// runtime owns the accepted REST runtime observation: a refresh failure
// keeps the last success; socket state is not runtime state.
const runtime = {
  state: null,
  stale: false,
  listeners: new Set(),
  async refresh() {
    try {
      this.state = await call('state.get');
      this.stale = false;
    } catch {
      this.stale = true;
    }
    this.render();
    this.listeners.forEach((fn) => fn(this.state));
  },
  render() {
    const st = this.state?.runtime?.status;
    badgeEl.textContent = st ? `runtime: ${st}${this.stale ? ' (stale)' : ''}` : 'runtime: unknown';
    badgeEl.className = `badge status-${st || 'unknown'}`;
    document.documentElement.dataset.runtime = st || '';
  },
  subscribe(fn) {
    this.listeners.add(fn);
    if (this.state) fn(this.state);
    return () => this.listeners.delete(fn);
  },
};

const live = new Live({
  onStatus: (s) => {
    connEl.textContent = s;
    connEl.dataset.state = s;
    document.documentElement.dataset.conn = s;
  },
});
live.on('runtime', null, () => runtime.refresh());
live.onReconnect(() => runtime.refresh());

const ctx = { live, runtime, navigate: (hash) => { location.hash = hash; } };

let current = null;

function parseRoute() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, q] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(q || '') };
}

// Card and system views load on first use, keeping them off the home
// page's critical path; routeSeq lets only the latest navigation mount.
let routeSeq = 0;

async function route() {
  const { parts, query } = parseRoute();
  const page = parts[0] || 'home';
  const key = `${page}|${parts[1] || ''}`;
  document.querySelectorAll('[data-nav]').forEach((a) => {
    a.setAttribute('aria-current', a.dataset.nav === (['card', 'session'].includes(page) ? 'home' : page) ? 'page' : 'false');
  });
  const seq = ++routeSeq;
  // The same card or session keeps its view (a facet change is internal).
  if (current && current.key === key && current.update) {
    current.update(parts, query);
    return;
  }
  let make;
  try {
    switch (page) {
      case 'card': { const m = await import('./card.js'); make = () => m.cardView(ctx, parts[1], parts[2]); break; }
      case 'session': { const m = await import('./card.js'); make = () => m.sessionView(ctx, parts[1]); break; }
      case 'files': { const m = await import('./system.js'); make = () => m.filesView(ctx, query.get('path') || ''); break; }
      case 'system': { const m = await import('./system.js'); make = () => m.systemView(ctx, parts[1] || 'events'); break; }
      case 'debug': { const m = await import('./system.js'); make = () => m.debugView(ctx); break; }
      default: make = () => homeView(ctx);
    }
  } catch (e) {
    if (seq === routeSeq) clear(main, failure(e, route));
    return;
  }
  if (seq !== routeSeq) return; // a later navigation won
  current?.destroy?.();
  current = null;
  const view = make();
  view.key = page === 'files' ? `files|${query.get('path') || ''}` : key;
  current = view;
  clear(main, view.el);
  document.title = view.title ? `${view.title} · Saivage` : 'Saivage cockpit';
}

function askToken(message) {
  document.getElementById('signin-error').textContent = message || '';
  if (!signin.open) signin.showModal();
  document.getElementById('token-input').focus();
}

auth.onUnauthorized = () => {
  auth.token = '';
  live.stop();
  askToken('The token was refused; paste the current operator token.');
};

document.getElementById('signin-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const input = document.getElementById('token-input');
  auth.token = input.value.trim();
  try {
    await call('state.get');
  } catch (e) {
    askToken(e.status === 401 ? 'That token was refused.' : `The server did not answer: ${e.message}`);
    return;
  }
  input.value = '';
  signin.close();
  boot();
});

let booted = false;
function boot() {
  if (booted) {
    live.start();
    runtime.refresh();
    route();
    return;
  }
  booted = true;
  live.start();
  runtime.refresh();
  window.addEventListener('hashchange', route);
  route();
  // After the first view started its reads: navigation follows the
  // Analyst from here on, on every view.
  watchNavigation(ctx);
}

// With a stored token the shell starts at once; a refused token brings the
// sign-in back (auth.onUnauthorized).
if (auth.token) {
  boot();
} else {
  askToken('');
}

