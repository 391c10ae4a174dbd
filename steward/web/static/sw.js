// Steward's service worker caches the app shell only: the page, the manifest
// and the versioned static files. API routes, the WebSocket, uploads and
// every other request go to the network untouched, so no personal data is
// ever stored by it.
const ASSETS = '{{ASSETS}}/';
const SHELL = ['/', '/manifest.webmanifest', ...{{SHELL_FILES}}.map((f) => ASSETS + f)];
const CACHE = `steward-shell-${ASSETS.split('/')[2]}`;

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k.startsWith('steward-shell-') && k !== CACHE).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

self.addEventListener('fetch', (event) => {
  const req = event.request;
  if (req.method !== 'GET') return;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin) return;
  if (req.mode === 'navigate' && url.pathname === '/') {
    // The network first, so a new version is seen at once; the cached shell offline.
    event.respondWith(fetch(req).catch(() => caches.match('/')));
    return;
  }
  if (url.pathname.startsWith(ASSETS) || url.pathname === '/manifest.webmanifest') {
    event.respondWith(caches.match(req).then((hit) => hit || fetch(req)));
  }
  // Anything else (/ws, /usage, /audit, /file/…, /pair, …) is not handled here.
});
