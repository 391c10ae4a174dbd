// The connection to the host: the token (localStorage, never a URL), loopback
// pairing, authenticated HTTP calls and the WebSocket with automatic
// reconnection.

const TOKEN_KEY = 'steward.token';

export const tokens = {
  get: () => localStorage.getItem(TOKEN_KEY) || '',
  set: (t) => localStorage.setItem(TOKEN_KEY, t.trim()),
  clear: () => localStorage.removeItem(TOKEN_KEY),
};

// pairFromLink takes the token from a pairing link (`steward pair`'s QR
// code: https://host/#pair=TOKEN) and erases it from the address bar and
// history at once. The fragment never reaches a server. It returns the token
// or ''.
export function pairFromLink() {
  const m = /^#pair=([^&]+)/.exec(location.hash);
  if (!m) return '';
  const token = decodeURIComponent(m[1]);
  history.replaceState(null, '', location.pathname + location.search);
  if (token.length < 16) return '';
  tokens.set(token);
  return token;
}

// pair asks the host for its token; the host answers only a page it served
// to a loopback client. It returns the token or ''.
export async function pair() {
  try {
    const res = await fetch('/pair', { cache: 'no-store', credentials: 'omit' });
    if (!res.ok) return '';
    const body = await res.json();
    if (typeof body.token === 'string' && body.token) {
      tokens.set(body.token);
      return body.token;
    }
  } catch { /* not loopback, or the host is down */ }
  return '';
}

export class HTTPError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// api calls an authenticated route and returns its JSON.
export async function api(path, opts = {}) {
  const headers = new Headers(opts.headers || {});
  headers.set('Authorization', `Bearer ${tokens.get()}`);
  const res = await fetch(path, { ...opts, headers, cache: 'no-store' });
  if (!res.ok) {
    let msg = `${res.status} ${res.statusText}`;
    try {
      const b = await res.json();
      if (b && b.error) msg = b.error;
    } catch { /* not JSON */ }
    throw new HTTPError(res.status, msg);
  }
  return opts.raw ? res : res.json();
}

// upload sends one file to POST /upload and returns {token, name, size, type}.
export function upload(file) {
  const form = new FormData();
  form.append('file', file, file.name);
  return api('/upload', { method: 'POST', body: form });
}

// download fetches an upload by token and saves it under its name.
export async function download(token, name) {
  const res = await api(`/file/${encodeURIComponent(token)}`, { raw: true });
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = name || 'file';
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

const BACKOFF = [250, 500, 1000, 2000, 4000, 5000];

// Connection is the WebSocket. It authenticates with the first frame,
// reconnects by itself with back-off, and dispatches:
//   'status'  detail: 'connecting' | 'open' | 'closed' (reconnecting) |
//             'unauthorized' | 'stopped'
//   'frame'   detail: every frame from the host
export class Connection extends EventTarget {
  constructor() {
    super();
    this.status = 'closed';
    this.ws = null;
    this.attempt = 0;
    this.seq = 0;
    this.waiting = new Map();
    this.timer = 0;
    this.stopped = true;
    const wake = () => {
      if (!this.stopped && this.status === 'closed') this.connectNow();
    };
    addEventListener('online', wake);
    document.addEventListener('visibilitychange', () => document.visibilityState === 'visible' && wake());
  }

  setStatus(s) {
    this.status = s;
    this.dispatchEvent(new CustomEvent('status', { detail: s }));
  }

  start() {
    this.stopped = false;
    this.connectNow();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close();
  }

  connectNow() {
    clearTimeout(this.timer);
    if (this.ws) {
      this.ws.onclose = null;
      this.ws.close();
    }
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`;
    let ws;
    try {
      ws = new WebSocket(url, ['steward.v1']);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    this.setStatus('connecting');
    let unauthorized = false;
    ws.onopen = () => ws.send(JSON.stringify({ v: 1, type: 'auth', token: tokens.get() }));
    ws.onmessage = (ev) => {
      let f;
      try {
        f = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (f.type === 'error' && f.code === 'unauthorized' && this.status === 'connecting') {
        unauthorized = true;
        return;
      }
      if (f.type === 'hello' && this.status === 'connecting') {
        this.attempt = 0;
        this.setStatus('open');
        return;
      }
      if (f.id && this.waiting.has(f.id)) {
        const w = this.waiting.get(f.id);
        this.waiting.delete(f.id);
        if (f.type === 'error') w.reject(new Error(f.message));
        else w.resolve(f);
      }
      this.dispatchEvent(new CustomEvent('frame', { detail: f }));
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      for (const w of this.waiting.values()) w.reject(new Error('disconnected'));
      this.waiting.clear();
      if (this.stopped) {
        this.setStatus('stopped');
        return;
      }
      if (unauthorized) {
        this.setStatus('unauthorized');
        return;
      }
      this.setStatus('closed');
      this.scheduleReconnect();
    };
  }

  scheduleReconnect() {
    if (this.stopped) return;
    const delay = BACKOFF[Math.min(this.attempt, BACKOFF.length - 1)];
    this.attempt++;
    this.timer = setTimeout(() => this.connectNow(), delay);
  }

  // send queues a frame; it returns false when not connected.
  send(frame) {
    if (this.status !== 'open') return false;
    this.ws.send(JSON.stringify({ v: 1, ...frame }));
    return true;
  }

  // request sends a frame with an id and resolves with the host's direct reply.
  request(frame) {
    const id = `r${++this.seq}`;
    return new Promise((resolve, reject) => {
      if (this.status !== 'open') {
        reject(new Error('not connected'));
        return;
      }
      this.waiting.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ v: 1, ...frame, id }));
    });
  }
}
