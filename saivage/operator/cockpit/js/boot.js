// A classic script the shell runs before its modules are even fetched: with
// a stored token on the home route it starts the home page's first reads
// (the root's first level above all), so they travel while the modules load
// and evaluate. api.js's call() takes each response once and validates it
// against the contract like any other; a refused token is handled there.
(() => {
  let token = '';
  try { token = localStorage.getItem('saivage-cockpit-token') || ''; } catch { return; }
  const route = location.hash.replace(/^#\/?/, '');
  if (!token || route !== '') return;
  const get = (path) => fetch(path, { headers: { Authorization: `Bearer ${token}` }, cache: 'no-store', priority: 'high' });
  window.saivagePrefetch = new Map(['/api/cards/project/children', '/api/state', '/api/cards/project'].map((p) => [p, get(p)]));
})();
