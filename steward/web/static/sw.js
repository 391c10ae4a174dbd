// Steward's service worker caches the app shell only: the page, the manifest
// and the versioned static files. API routes, the WebSocket, uploads and
// every other request go to the network untouched, so no personal data is
// ever stored by it. It also shows Web Push notifications and opens the chat
// a notification is about. It is a module worker (registered with type
// 'module'; Chromium 91, Safari 15, Firefox 147).
import {
  parsePush, notificationFromPayload, chatFromNotification, openChatMessage, pickWindow, chatUrl,
  actionFromPayload, actionUrl, openActionMessage, validActionId,
} from '{{ASSETS}}/js/notify.js';

const ASSETS = '{{ASSETS}}/';
const SHELL = ['/', '/manifest.webmanifest', ...{{SHELL_FILES}}.map((f) => ASSETS + f)];
const CACHE = `steward-shell-${ASSETS.split('/')[2]}`;
const ICON = `${ASSETS}icons/icon-192.png`;

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

// A push always shows a notification (userVisibleOnly): the host's, or a
// plain one when the payload is missing or unreadable.
self.addEventListener('push', (event) => {
  let text = '';
  try {
    text = event.data ? event.data.text() : '';
  } catch { /* undecodable: the defaults */ }
  const payload = parsePush(text);
  const { title, options } = notificationFromPayload(payload, { origin: self.location.origin, icon: ICON });
  const actionId = actionFromPayload(payload, self.location.origin);
  if (actionId) options.data = { ...options.data, actionId, url: actionUrl(actionId) };
  event.waitUntil(self.registration.showNotification(title, options));
});

// A click focuses an open app window and asks it to show the chat, or opens
// a new window whose URL names the chat (never the token).
self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const chatId = chatFromNotification(event.notification.data);
  const actionId = validActionId(event.notification.data?.actionId);
  event.waitUntil((async () => {
    const win = pickWindow(await self.clients.matchAll({ type: 'window', includeUncontrolled: true }), self.location.origin);
    if (win) {
      if (chatId) win.postMessage(openChatMessage(chatId));
      if (actionId) win.postMessage(openActionMessage(actionId));
      try {
        await win.focus();
        return;
      } catch { /* not focusable: open a window instead */ }
    }
    await self.clients.openWindow(actionId ? actionUrl(actionId) : chatUrl(chatId));
  })());
});
