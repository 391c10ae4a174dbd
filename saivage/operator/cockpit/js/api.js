// The operator API client. Every call goes through the contract registry
// the server publishes (/contracts.js): the route, the accepted query keys
// and the statuses an operation may answer are the server's own table, so
// an undeclared or malformed answer fails here, before any view uses it.
import { operations } from '/contracts.js';

const TOKEN_KEY = 'saivage-cockpit-token';

export const auth = {
  get token() { return localStorage.getItem(TOKEN_KEY) || ''; },
  set token(v) { if (v) localStorage.setItem(TOKEN_KEY, v); else localStorage.removeItem(TOKEN_KEY); },
  onUnauthorized: () => {},
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// call performs one operation. params fill the path, query is checked
// against the declared keys; raw returns the Response of a 2xx (files).
export async function call(name, { params = {}, query = {}, body, signal, raw = false } = {}) {
  const op = operations[name];
  if (!op) throw new Error(`unknown operation ${name}`);
  const path = op.path.replace(/:([A-Za-z]+)/g, (_, k) => {
    if (params[k] === undefined || params[k] === null) throw new Error(`${name} needs ${k}`);
    return encodeURIComponent(params[k]);
  });
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || v === null || v === '') continue;
    if (!(op.query || []).includes(k)) throw new Error(`${name} takes no query key ${k}`);
    qs.set(k, String(v));
  }
  const headers = {};
  if (!op.public) headers.Authorization = `Bearer ${auth.token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const url = path + (qs.size ? `?${qs}` : '');
  const res = await (prefetched(op.method, url) || fetch(url, {
    method: op.method, headers, signal, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  }));
  if (!op.statuses.includes(res.status)) {
    throw new ApiError(res.status, 'Undeclared', `${name} answered HTTP ${res.status}, which its contract does not declare`);
  }
  if (raw && res.ok) return res;
  let data;
  try {
    data = await res.json();
  } catch {
    throw new ApiError(res.status, 'Malformed', `${name} answered HTTP ${res.status} with a body that is not JSON`);
  }
  if (!res.ok) {
    if (res.status === 401) auth.onUnauthorized();
    throw new ApiError(res.status, data.error || 'Error', data.message || `HTTP ${res.status}`);
  }
  return data;
}

// prefetched hands out, once, a response boot.js started for this GET
// before the modules loaded (same token, same route).
function prefetched(method, url) {
  const started = window.saivagePrefetch;
  const res = method === 'GET' && started?.get(url);
  if (!res) return null;
  started.delete(url);
  return res;
}

// trailing wraps a refetch so that at most one runs and one more follows:
// a call while one runs marks it dirty and it is repeated once when it
// ends. Aborting instead would let a stream of hints restart the request
// before it ever finishes.
export function trailing(fn) {
  let running = null;
  let again = false;
  return () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await fn();
        } while (again);
      } finally {
        running = null;
      }
    })();
    return running;
  };
}

// owner is one view's request owner: a new request aborts the previous
// one, and only the latest request's outcome is current. An aborted
// request reports { current: false }.
export function owner() {
  let ctl = null;
  let gen = 0;
  return {
    async run(fn) {
      ctl?.abort();
      ctl = new AbortController();
      const mine = ++gen;
      try {
        const value = await fn(ctl.signal);
        return { current: mine === gen, value };
      } catch (error) {
        if (error.name === 'AbortError') return { current: false };
        return { current: mine === gen, error };
      }
    },
    abort() {
      ctl?.abort();
      gen++;
    },
  };
}
