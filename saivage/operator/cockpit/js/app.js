// The cockpit shell: sign-in, the runtime store, the live socket and the
// hash router (home, card, session, files, system, debug).
import { auth, call } from './api.js';
import { clear } from './dom.js';
import { Live } from './live.js';
import { homeView } from './home.js';
import { cardView, sessionView } from './card.js';
import { filesView, systemView, debugView } from './system.js';

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

function route() {
  const { parts, query } = parseRoute();
  const page = parts[0] || 'home';
  const key = `${page}|${parts[1] || ''}`;
  document.querySelectorAll('[data-nav]').forEach((a) => {
    a.setAttribute('aria-current', a.dataset.nav === (['card', 'session'].includes(page) ? 'home' : page) ? 'page' : 'false');
  });
  // The same card or session keeps its view (a facet change is internal).
  if (current && current.key === key && current.update) {
    current.update(parts, query);
    return;
  }
  current?.destroy?.();
  let view;
  switch (page) {
    case 'card': view = cardView(ctx, parts[1], parts[2]); break;
    case 'session': view = sessionView(ctx, parts[1]); break;
    case 'files': view = filesView(ctx, query.get('path') || ''); break;
    case 'system': view = systemView(ctx, parts[1] || 'events'); break;
    case 'debug': view = debugView(ctx); break;
    default: view = homeView(ctx);
  }
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
}

// With a stored token the shell starts at once; a refused token brings the
// sign-in back (auth.onUnauthorized).
if (auth.token) {
  boot();
} else {
  askToken('');
}

