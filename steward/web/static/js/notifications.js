// Web Push on this device: the permission, the browser's push subscription
// and its registration with the host (/push/*), the System page's controls
// and the one-time prompt. Loaded after the app is usable.

import { h, clear } from './dom.js';
import { api } from './conn.js';

const ASKED_KEY = 'steward.notify.asked';
// Hang guards: the worker is active long before, and a push service answers
// in a second or two — unless it is blocked on this network or disabled in
// the browser, when subscribe() may never settle.
const READY_TIMEOUT_MS = 15000;
const SUBSCRIBE_TIMEOUT_MS = 30000;

// supported: Web Push needs a secure context (HTTPS or loopback), a service
// worker and the Push and Notification APIs (an iPhone has them in a Home
// Screen app only).
export function supported() {
  return window.isSecureContext && 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;
}

// base64UrlToBytes decodes the host's VAPID public key for subscribe().
function base64UrlToBytes(s) {
  const b64 = String(s).replace(/-/g, '+').replace(/_/g, '/');
  const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function sameKey(buf, key) {
  if (!buf) return false;
  const a = new Uint8Array(buf);
  return a.length === key.length && a.every((x, i) => x === key[i]);
}

async function within(promise, ms, message) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function currentSubscription() {
  const reg = await navigator.serviceWorker.getRegistration('/');
  return reg ? reg.pushManager.getSubscription() : null;
}

// pushState is 'unsupported', 'blocked' (the user or the browser denied
// notifications), 'enabled' (allowed and subscribed) or 'off'.
export async function pushState() {
  if (!supported()) return 'unsupported';
  if (Notification.permission === 'denied') return 'blocked';
  if (Notification.permission !== 'granted') return 'off';
  return (await currentSubscription()) ? 'enabled' : 'off';
}

function deviceLabel() {
  const ua = navigator.userAgentData;
  const brand = ua?.brands?.find((b) => !/not.?a.?brand/i.test(b.brand) && b.brand !== 'Chromium')?.brand
    || ua?.brands?.find((b) => !/not.?a.?brand/i.test(b.brand))?.brand || '';
  const platform = ua?.platform || '';
  return [brand, platform].filter(Boolean).join(' on ').slice(0, 80);
}

// subscribe makes sure the browser holds a subscription for the host's
// current key and that the host has it (POST /push/subscribe replaces by
// endpoint, so repeating it is harmless).
async function subscribe() {
  const { publicKey } = await api('/push/public-key');
  const key = base64UrlToBytes(publicKey);
  const reg = await within(navigator.serviceWorker.ready, READY_TIMEOUT_MS, 'the service worker is not running; reload the page and try again');
  let sub = await reg.pushManager.getSubscription();
  if (sub && !sameKey(sub.options?.applicationServerKey, key)) {
    // Made for another host key (a new STEWARD_HOME): it can never be sent to.
    await sub.unsubscribe();
    sub = null;
  }
  if (!sub) {
    sub = await within(reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key }), SUBSCRIBE_TIMEOUT_MS,
      'the browser’s push service did not answer (it may be blocked on this network or turned off in this browser)');
  }
  await api('/push/subscribe', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...sub.toJSON(), label: deviceLabel() }),
  });
}

// enablePush asks for permission (call it from a click: browsers require a
// user gesture) and subscribes; it returns the new state.
export async function enablePush() {
  if (!supported()) return 'unsupported';
  localStorage.setItem(ASKED_KEY, '1');
  const perm = await Notification.requestPermission();
  if (perm === 'denied') return 'blocked';
  if (perm !== 'granted') return 'off';
  await subscribe();
  return 'enabled';
}

// disablePush tells the host to forget this device, then ends the browser's
// subscription (even when the host could not be told: it prunes the dead
// endpoint at its next send).
export async function disablePush() {
  const sub = supported() ? await currentSubscription() : null;
  if (!sub) return pushState();
  let hostErr = null;
  try {
    await api('/push/unsubscribe', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ endpoint: sub.endpoint }),
    });
  } catch (err) {
    hostErr = err;
  }
  await sub.unsubscribe();
  if (hostErr) throw new Error(`the host could not be told (${hostErr.message}); this browser no longer receives them`);
  return pushState();
}

// syncPush re-registers an existing subscription with the host once per
// load, so a host that lost it (or changed its key) gets it back without the
// user doing anything.
export async function syncPush() {
  if ((await pushState()) === 'enabled') await subscribe();
}

const STATE_TEXT = {
  enabled: 'Notifications are on for this device: your watches alert you here, even when the app is closed.',
  off: 'Notifications are off for this device.',
  blocked: 'Notifications are blocked for this site in the browser. Allow them in the site settings (the icon beside the address), then come back.',
  unsupported: 'This browser cannot receive notifications here. It needs HTTPS or the app opened on this computer, and Web Push support (on an iPhone or iPad, add Steward to the Home Screen and open it from there).',
};

// controls is the System page's Notifications section.
export function controls(app) {
  const box = h('div', { class: 'notifications', 'aria-live': 'polite' });
  let busy = false;
  const run = async (fn, failed, done) => {
    if (busy) return;
    busy = true;
    box.setAttribute('aria-busy', 'true');
    let msg = '';
    try {
      const r = await fn();
      if (done) msg = done(r);
    } catch (err) {
      msg = `Could not ${failed}: ${err.message}`;
    }
    busy = false;
    box.removeAttribute('aria-busy');
    app.pushPrompt?.remove(); // decided here: the sidebar no longer asks
    await draw(msg);
  };
  async function draw(message) {
    const state = await pushState().catch(() => 'off');
    const actions = [];
    if (state === 'off') {
      actions.push(h('button', { type: 'button', class: 'primary', 'on:click': () => run(enablePush, 'enable notifications') }, 'Enable notifications'));
    }
    if (state === 'enabled') {
      actions.push(h('button', { type: 'button', 'on:click': () => run(() => api('/push/test', { method: 'POST' }), 'send a test notification',
        (r) => `Test sent: ${r.delivered} of ${r.attempted} device${r.attempted === 1 ? '' : 's'} accepted it.${r.errors?.length ? ` ${r.errors.join('; ')}` : ''}`) },
      'Send a test notification'));
      actions.push(h('button', { type: 'button', class: 'danger', 'on:click': () => run(disablePush, 'turn notifications off') }, 'Turn off notifications'));
    }
    box.dataset.state = state;
    clear(box).append(...[
      h('h3', null, 'Notifications'),
      h('p', { class: 'notify-state' }, STATE_TEXT[state]),
      actions.length ? h('div', { class: 'actions' }, actions) : null,
      message ? h('p', { class: message.startsWith('Could not') ? 'error' : 'muted small', role: 'status' }, message) : null,
    ].filter(Boolean));
  }
  draw();
  return box;
}

// prompt offers notifications once, in the sidebar before `where`, on a
// device that has not decided yet; either button dismisses it for good.
export function prompt(app, where) {
  if (!supported() || Notification.permission !== 'default' || localStorage.getItem(ASKED_KEY)) return null;
  const el = h('div', { class: 'notify-prompt', role: 'region', 'aria-label': 'Notifications' },
    h('p', null, 'Get a notification on this device when one of your watches fires (a train, a reminder).'),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'primary', 'on:click': async () => {
        // Answered either way: a permission prompt the user closes without
        // choosing must not bring the offer back on every load.
        localStorage.setItem(ASKED_KEY, '1');
        el.remove();
        try {
          const state = await enablePush();
          app.toast({ enabled: 'Notifications are on for this device.', blocked: STATE_TEXT.blocked }[state] || 'Notifications stay off.');
        } catch (err) {
          app.toast(`Could not enable notifications: ${err.message}`);
        }
      } }, 'Enable notifications'),
      h('button', { type: 'button', 'on:click': () => {
        localStorage.setItem(ASKED_KEY, '1');
        el.remove();
      } }, 'Not now')));
  where.before(el);
  return el;
}
