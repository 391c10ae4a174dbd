// Steward's web app: routing, the chat list, navigation, pairing and the
// connection lifecycle. The host decides everything; this is a view.

import { h, clear } from './dom.js';
import { Connection, tokens, pair, pairFromLink } from './conn.js';
import { ChatView } from './chat.js';
import { chatParam, withoutChatParam, chatFromMessage, actionParam, actionFromMessage } from './notify.js';

const $ = (sel) => document.querySelector(sel);

class App {
  constructor() {
    this.conn = new Connection();
    this.chats = new Map();
    this.pending = new Map(); // approvalId → approval.request
    this.view = null; // ChatView when a chat is shown
    this.page = null; // the route's page element
    this.ready = false;
    this.needsSetup = false; // GET /setup said no chat model is usable
    this.repaired = false; // re-paired once after the host refused the token
    this.main = $('#main');
    this.list = $('#chat-list');
    this.statusEl = $('#conn-status');
    this.banner = $('#banner');
    // A notification opened this window for a chat (?chat=…): selected once
    // the connection is authenticated, then removed from the address bar.
    this.pendingChat = chatParam(location.href).chatId;
    // The same for an Action Center item (?action=…), from a push about it.
    this.pendingAction = actionParam(location.href);
    this.pushPrompt = null;

    $('#new-chat').addEventListener('click', () => this.go('#/new'));
    this.conn.addEventListener('status', (e) => this.onStatus(e.detail));
    this.conn.addEventListener('frame', (e) => this.onFrame(e.detail));
    addEventListener('hashchange', () => this.route());
    // A chat that received automatic messages while the page was hidden is
    // marked read when it is looked at again.
    document.addEventListener('visibilitychange', () => {
      this.sendFocus();
      if (document.visibilityState === 'visible') this.markOpenChatRead();
    });
    this.setupMore();
  }

  async start() {
    pairFromLink(); // a scanned pairing link replaces any saved token
    if (!tokens.get() && !(await pair())) {
      this.route();
      this.showPairing();
      return;
    }
    this.route();
    this.conn.start();
  }

  go(hash) {
    if (location.hash === hash) this.route();
    else location.hash = hash;
  }

  toast(text) {
    const t = h('div', { class: 'toast', role: 'status' }, text);
    $('#toasts').append(t);
    setTimeout(() => t.remove(), 5000);
  }

  onStatus(s) {
    document.documentElement.dataset.conn = s;
    const label = { open: 'Connected', connecting: 'Connecting…', closed: 'Reconnecting…', unauthorized: 'Token refused', stopped: 'Not paired' }[s] || s;
    this.statusEl.textContent = label;
    // The banner is for a lost connection, not for the first connect.
    this.banner.hidden = !(s === 'closed' || (s === 'connecting' && this.ready));
    this.banner.textContent = 'Connection to Steward lost. Reconnecting…';
    if (s === 'open') {
      // Counted so that a reconnection is observable (tests, diagnostics).
      document.documentElement.dataset.connects = String(Number(document.documentElement.dataset.connects || 0) + 1);
      this.conn.request({ type: 'chat.list' }).then(() => {
        // A chat a notification asked for, or the one that was open
        // (restored with its pending approvals).
        if (!this.openPendingChat() && !this.openPendingAction() && this.view?.chatId) this.openChat(this.view.chatId);
        this.markReady();
        import('./actions.js').then((m) => m.refreshBadge(), () => {});
      }, () => {});
    }
    if (s === 'unauthorized') this.onUnauthorized();
    this.view?.updateComposer();
  }

  async onUnauthorized() {
    tokens.clear();
    // The token changed (a new STEWARD_AUTH_TOKEN): a local page pairs
    // again, once, rather than looping if the host keeps refusing.
    if (!this.repaired && await pair()) {
      this.repaired = true;
      this.conn.start();
      return;
    }
    this.showPairing('The host refused the saved token. Enter the current one.');
  }

  markReady() {
    if (this.ready) return;
    this.ready = true;
    performance.mark('steward-ready');
    document.documentElement.dataset.ready = '1';
    this.setupPush();
    import('./setup.js').then(async (m) => {
      const s = await m.status();
      if (s && !s.status.ready) {
        this.needsSetup = true;
        const r = document.body.dataset.route;
        if (r === 'chats' || r === 'chat' || r === 'new') this.route();
      }
    });
    import('./background.js').then((m) => m.startBanner()); // the start-up search preparation
  }

  // openPendingChat shows the chat a notification asked for, once the
  // connection is up, and drops the chat parameter from the address bar (a
  // reload must not jump back to it). It reports whether it routed.
  openPendingChat() {
    const id = this.pendingChat;
    this.pendingChat = '';
    if (chatParam(location.href).present) {
      // replaceState fires no hashchange: route by hand.
      history.replaceState(history.state, '', withoutChatParam(location.href, id));
      if (id) this.route();
    } else if (id) this.go(`#/c/${encodeURIComponent(id)}`);
    return !!id;
  }

  // openPendingAction shows the Action Center item a notification asked
  // for, once, after the authenticated connection, and drops the parameter.
  openPendingAction() {
    const id = this.pendingAction;
    this.pendingAction = '';
    if (!id) return false;
    const u = new URL(location.href);
    u.searchParams.delete('action');
    history.replaceState(history.state, '', u.pathname + u.search + `#/actions/${id}`);
    this.route();
    return true;
  }

  openActionFromNotification(id) {
    this.pendingAction = id;
    if (this.ready && this.conn.status === 'open') this.openPendingAction();
  }

  // openFromNotification handles the service worker's request to show a chat
  // (a notification clicked while this window was open).
  openFromNotification(id) {
    this.pendingChat = id;
    if (this.ready && this.conn.status === 'open') this.openPendingChat();
  }

  // setupPush loads the notification module after the app is usable: a
  // one-time offer in the sidebar, and an existing subscription re-sent to
  // the host.
  setupPush() {
    import('./notifications.js').then((m) => {
      this.pushPrompt = m.prompt(this, $('.chat-nav'));
      m.syncPush().catch(() => {});
    }, () => {});
  }

  // markOpenChatRead reads the chat on screen again when automatic messages
  // (a watch) marked it unread: opening is what tells the host it was seen.
  markOpenChatRead() {
    const id = this.view?.chatId;
    if (id && this.chats.get(id)?.unread && document.visibilityState === 'visible' && this.conn.status === 'open') this.openChat(id, 0, true);
  }

  onFrame(f) {
    switch (f.type) {
      case 'chats':
        this.chats = new Map(f.chats.map((c) => [c.id, c]));
        this.renderChatList();
        // A phone that opened '/' before the list arrived opens the last
        // chat now, unless the user has started typing a new one.
        if (this.openLastWhenListed && (location.hash || '#/') === '#/' && !this.view?.chatId && !this.view?.textarea.value) this.route();
        this.openLastWhenListed = false;
        return;
      case 'chat.updated': {
        this.chats.set(f.chat.id, { ...this.chats.get(f.chat.id), ...f.chat });
        if (this.view?.chatId === f.chat.id) this.view.setTitle(f.chat.title);
        this.renderChatList();
        this.markOpenChatRead(); // automatic messages in the chat on screen are read
        return;
      }
      case 'chat.deleted':
        this.chats.delete(f.chatId);
        this.renderChatList();
        if (this.view?.chatId === f.chatId) this.go('#/');
        return;
      case 'approval.request':
        this.pending.set(f.approvalId, f);
        this.renderChatList();
        break;
      case 'approval.resolved':
        this.pending.delete(f.approvalId);
        this.renderChatList();
        break;
      case 'turn.done':
        // The host orders chats by their last update.
        this.conn.request({ type: 'chat.list' }).catch(() => {});
        break;
      case 'error':
        if (!f.id) this.toast(f.message);
        break;
      default:
        break;
    }
    if (f.chatId && this.view?.chatId === f.chatId) this.view.onFrame(f);
  }

  // sortedChats lists the chats most recently updated first.
  sortedChats() {
    return [...this.chats.values()].sort((a, b) => String(b.updatedAt).localeCompare(String(a.updatedAt)));
  }

  renderChatList() {
    const sorted = this.sortedChats();
    const waiting = new Set([...this.pending.values()].map((p) => p.chatId));
    const current = this.view?.chatId;
    clear(this.list).append(...sorted.map((c) => h('li', null,
      h('a', {
        href: `#/c/${c.id}`, class: ['chat-link', c.id === current && 'current', c.unread && 'unread'],
        'aria-current': c.id === current ? 'page' : null, dataset: { chatId: c.id },
      },
      h('span', { class: 'chat-link-title' }, c.title || 'Untitled'),
      c.unread ? h('span', { class: 'dot', title: 'Unread', 'aria-label': 'unread' }) : null,
      waiting.has(c.id) ? h('span', { class: 'badge warn', 'aria-label': 'waiting for approval' }, 'approval') : null))));
    if (sorted.length === 0) this.list.append(h('li', { class: 'muted empty-list' }, 'No chats yet.'));
  }

  // openChat loads a chat's transcript. The host stores an entry before it
  // publishes its frame, so when a stored kind of frame arrived while the
  // transcript was on its way, a second read has everything. With live, the
  // view follows the chat already and its running state (from live frames)
  // is kept: the host may still count a turn whose turn.done has arrived.
  // sendFocus tells the host which chat this page shows while visible, so
  // that it pushes a notification only for chats nobody is looking at.
  sendFocus() {
    const chatId = this.view?.chatId || '';
    this.conn.send({ type: 'client.focus', chatId, visible: document.visibilityState === 'visible' && !!chatId });
  }

  openChat(id, tries = 0, live = false) {
    const view = this.view;
    if (tries === 0) this.sendFocus();
    const seen = view.stored;
    this.conn.request({ type: 'chat.open', chatId: id }).then((t) => {
      if (this.view !== view) return;
      const c = this.chats.get(id);
      if (c) c.unread = false;
      const running = view.running;
      view.load(t);
      if (live) {
        view.running = running;
        view.updateComposer();
      }
      this.renderChatList();
      if (view.stored !== seen && tries < 3) this.openChat(id, tries + 1, live);
    }, (err) => {
      if (this.view?.chatId === id && this.conn.status === 'open') {
        this.toast(`Could not open the chat: ${err.message}`);
        this.go('#/');
      }
    });
  }

  // route shows the view named by the location hash.
  async route() {
    const hash = location.hash || '#/';
    const [, name = '', arg = ''] = hash.match(/^#\/([\w-]*)\/?(.*)$/) || [];
    // On a phone, '/' (the app opened from the home screen) continues the
    // most recent chat; New (#/new) starts one.
    this.openLastWhenListed = false;
    if (name === '' && matchMedia('(max-width: 767px)').matches) {
      const last = this.sortedChats()[0];
      if (last) {
        history.replaceState(null, '', `#/c/${encodeURIComponent(last.id)}`);
        return this.route();
      }
      this.openLastWhenListed = true;
    }
    // '/' is a composer (on a phone, once the chat list is known, the last
    // chat); the chat list has its own route.
    document.body.dataset.route = name || 'new';
    this.closeMore();
    clear($('#toasts'));
    // An open chat belongs to Chats, a new one to New; the pages under More
    // light More up.
    const section = { '': 'chat', new: 'chat', c: 'chats' }[name] ?? name;
    for (const a of document.querySelectorAll('[data-nav]')) {
      const on = a.dataset.nav === section;
      a.classList.toggle('current', on);
      if (on) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    $('#more-button').classList.toggle('current', ['wiki', 'audit', 'system', 'actions'].includes(section));
    this.view = null;
    this.sendFocus();
    if (name === 'c' && arg) {
      this.view = new ChatView(this, decodeURIComponent(arg));
      this.show(this.view.el);
      if (this.conn.status === 'open') this.openChat(this.view.chatId);
      this.renderChatList();
      return;
    }
    // With no usable chat model, a chat would only fail: the first-run
    // screen comes instead.
    if (name === 'setup' || (this.needsSetup && (name === '' || name === 'new'))) {
      const mod = await import('./setup.js');
      document.body.dataset.route = 'setup';
      this.show(mod.render(this));
      return;
    }
    if (name === 'usage' || name === 'audit' || name === 'system' || name === 'wiki' || name === 'actions') {
      const placeholder = h('section', { class: 'page', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Loading…'));
      this.show(placeholder);
      const mod = await import(`./${name}.js`);
      if (this.page !== placeholder) return; // navigated away meanwhile
      this.show(mod.render(this, arg));
      this.renderChatList();
      return;
    }
    // '', 'new' and 'chats' (a phone's list over it): an empty chat whose
    // first message creates it.
    this.view = new ChatView(this, '');
    this.show(this.view.el);
    this.renderChatList();
    if (name === 'new') this.view.textarea.focus();
  }

  show(el) {
    this.page = el;
    clear(this.main).append(el);
  }

  showPairing(reason) {
    const input = h('input', { id: 'pair-token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true });
    const form = h('form', { class: 'pair-form', 'on:submit': (e) => {
      e.preventDefault();
      tokens.set(input.value);
      this.conn.start();
      this.route();
    } },
    h('h2', null, 'Pair this device'),
    reason ? h('p', { class: 'error', role: 'alert' }, reason) : null,
    h('p', null, 'Enter the host token once; this browser keeps it. It is in the file ', h('code', null, 'auth-token'),
      ' inside STEWARD_HOME on the computer running Steward (on a Mac: ', h('code', null, '~/Library/Application Support/Steward/auth-token'), ').'),
    h('label', { for: 'pair-token' }, 'Host token'), input,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Pair')));
    this.view = null;
    document.body.dataset.route = 'pair'; // on a phone, the chats route would hide the form
    this.show(h('section', { class: 'page pair-view' }, form));
    input.focus();
  }

  setupMore() {
    const btn = $('#more-button');
    const menu = $('#more-menu');
    btn.addEventListener('click', () => {
      const open = btn.getAttribute('aria-expanded') !== 'true';
      btn.setAttribute('aria-expanded', String(open));
      menu.hidden = !open;
      if (open) menu.querySelector('a')?.focus();
    });
    menu.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') {
        this.closeMore();
        btn.focus();
      }
    });
    document.addEventListener('click', (e) => {
      if (!menu.hidden && !menu.contains(e.target) && e.target !== btn && !btn.contains(e.target)) this.closeMore();
    });
  }

  closeMore() {
    $('#more-button').setAttribute('aria-expanded', 'false');
    $('#more-menu').hidden = true;
  }
}

const app = new App();
app.start();
if ('serviceWorker' in navigator && window.isSecureContext) {
  navigator.serviceWorker.register('/sw.js', { scope: '/', type: 'module' }).catch(() => {});
  // Only our own service worker can post here; its message is validated.
  navigator.serviceWorker.addEventListener('message', (e) => {
    if (!(e.source instanceof ServiceWorker) || (e.origin && e.origin !== location.origin)) return;
    const id = chatFromMessage(e.data);
    if (id) app.openFromNotification(id);
    const action = actionFromMessage(e.data);
    if (action) app.openActionFromNotification(action);
  });
  navigator.serviceWorker.startMessages();
}
