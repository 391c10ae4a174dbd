// Pure helpers shared by the service worker and the page for Web Push: the
// push payload → notification, the chat a click opens, and the messages and
// URL parameters that carry it. No DOM, no globals: the service worker imports
// this module, and the browser tests import it on the app's origin.
//
// A notification only ever carries a chat id, never the host token: the page
// that opens authenticates as usual and then selects the chat.

export const DEFAULT_TITLE = 'Steward';
export const DEFAULT_BODY = 'Steward has something for you.';
// OPEN_CHAT is the type of the service worker's message asking a window to
// show a chat.
export const OPEN_CHAT = 'steward.open-chat';
// CHAT_PARAM is the URL parameter naming the chat a new window opens.
export const CHAT_PARAM = 'chat';

// The host's chat ids are "chat_" and hex (chats.NewID); a little slack for
// other generators, nothing that could break out of a URL or a route.
const CHAT_ID = /^chat_[A-Za-z0-9_-]{1,64}$/;
const MAX_TITLE = 80;
const MAX_BODY = 240;
const MAX_TAG = 128;

// validChatId returns v when it is a chat id, and '' for anything else.
export function validChatId(v) {
  return typeof v === 'string' && CHAT_ID.test(v) ? v : '';
}

// chatUrl is the app URL that opens a chat ('/' without one).
export function chatUrl(chatId) {
  const id = validChatId(chatId);
  return id ? `/?${CHAT_PARAM}=${encodeURIComponent(id)}` : '/';
}

// cleanText keeps a bounded, printable string: control characters become
// spaces (line breaks are kept where multiline is true) and anything longer
// than max characters ends with an ellipsis.
function cleanText(v, max, multiline) {
  if (typeof v !== 'string') return '';
  let s = v.replace(multiline ? /[\u0000-\u0009\u000b-\u001f\u007f]/g : /[\u0000-\u001f\u007f]/g, ' ');
  s = multiline ? s.replace(/[ \t]+/g, ' ').replace(/\n{3,}/g, '\n\n').trim() : s.replace(/\s+/g, ' ').trim();
  const chars = [...s];
  return chars.length > max ? `${chars.slice(0, max - 1).join('').trimEnd()}…` : s;
}

// chatFromUrl returns the chat named by a same-origin URL's chat parameter.
export function chatFromUrl(url, origin) {
  if (typeof url !== 'string' || !url) return '';
  try {
    const u = new URL(url, origin);
    return u.origin === origin ? validChatId(u.searchParams.get(CHAT_PARAM)) : '';
  } catch {
    return '';
  }
}

// parsePush reads a push message's text: the host sends JSON; plain text is
// kept as the body; anything unreadable gives the defaults.
export function parsePush(text) {
  if (typeof text !== 'string' || !text.trim()) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

// notificationFromPayload turns a push payload ({title, body, tag, url,
// chatId} as steward/push sends it, a string, or anything malformed) into
// showNotification's arguments. The chat comes from chatId or the url's chat
// parameter, validated; the click URL is rebuilt from it, so a payload can
// never send the user to another site.
export function notificationFromPayload(payload, { origin, icon } = {}) {
  const p = payload && typeof payload === 'object' && !Array.isArray(payload)
    ? payload
    : { body: typeof payload === 'string' ? payload : '' };
  const chatId = validChatId(p.chatId) || chatFromUrl(p.url, origin);
  const options = {
    body: cleanText(p.body, MAX_BODY, true) || DEFAULT_BODY,
    data: { url: chatUrl(chatId), chatId },
  };
  if (icon) options.icon = icon;
  const tag = cleanText(p.tag, MAX_TAG, false);
  if (tag) options.tag = tag;
  return { title: cleanText(p.title, MAX_TITLE, false) || DEFAULT_TITLE, options };
}

// chatFromNotification returns the chat a clicked notification opens.
export function chatFromNotification(data) {
  return data && typeof data === 'object' ? validChatId(data.chatId) : '';
}

// openChatMessage is what the service worker posts to an existing window.
export function openChatMessage(chatId) {
  return { type: OPEN_CHAT, chatId: validChatId(chatId) };
}

// chatFromMessage validates a message posted to the page: only OPEN_CHAT
// with a valid chat id counts.
export function chatFromMessage(data) {
  if (!data || typeof data !== 'object' || data.type !== OPEN_CHAT) return '';
  return validChatId(data.chatId);
}

// pickWindow chooses, among the window clients, the one a click focuses: a
// focused app window, else the most recently focused one (clients.matchAll
// lists them in that order), else null.
export function pickWindow(clients, origin) {
  const ours = [...(clients || [])].filter((c) => {
    try {
      return new URL(c.url).origin === origin;
    } catch {
      return false;
    }
  });
  return ours.find((c) => c.focused) || ours[0] || null;
}

// chatParam reads the chat a page was opened for ({present, chatId}):
// present when the URL has the parameter at all, chatId '' when invalid.
export function chatParam(href) {
  try {
    const u = new URL(href);
    return { present: u.searchParams.has(CHAT_PARAM), chatId: validChatId(u.searchParams.get(CHAT_PARAM)) };
  } catch {
    return { present: false, chatId: '' };
  }
}

// withoutChatParam returns href's path, query and hash with the chat
// parameter removed and, for a valid chatId, the hash routing to that chat.
export function withoutChatParam(href, chatId) {
  const u = new URL(href);
  u.searchParams.delete(CHAT_PARAM);
  const id = validChatId(chatId);
  if (id) u.hash = `#/c/${encodeURIComponent(id)}`;
  return u.pathname + u.search + u.hash;
}

// --- Action Center items -------------------------------------------------
// A notification about a new Action carries its numeric id (data.actionId,
// or the url's action parameter); the click opens /?action=ID#/actions.

export const OPEN_ACTION = 'steward.open-action';
export const ACTION_PARAM = 'action';
const ACTION_ID = /^[1-9][0-9]{0,15}$/;

// validActionId returns v (a string of digits) when it is an item id, else ''.
export function validActionId(v) {
  const s = typeof v === 'number' ? String(v) : v;
  return typeof s === 'string' && ACTION_ID.test(s) ? s : '';
}

// actionFromPayload returns the item a push payload is about ('' for none).
export function actionFromPayload(payload, origin) {
  if (!payload || typeof payload !== 'object') return '';
  const direct = validActionId(payload.data?.actionId);
  if (direct) return direct;
  try {
    const u = new URL(payload.url || '', origin);
    return u.origin === origin ? validActionId(u.searchParams.get(ACTION_PARAM)) : '';
  } catch {
    return '';
  }
}

// actionUrl is the app URL that opens an item.
export function actionUrl(id) {
  const a = validActionId(id);
  return a ? `/?${ACTION_PARAM}=${a}#/actions` : '/';
}

// openActionMessage is what the service worker posts to an open window.
export function openActionMessage(id) {
  return { type: OPEN_ACTION, actionId: validActionId(id) };
}

// actionFromMessage validates a posted message: only OPEN_ACTION counts.
export function actionFromMessage(data) {
  if (!data || typeof data !== 'object' || data.type !== OPEN_ACTION) return '';
  return validActionId(data.actionId);
}

// actionParam reads the item a page was opened for ('' when none or invalid).
export function actionParam(href) {
  try {
    return validActionId(new URL(href).searchParams.get(ACTION_PARAM));
  } catch {
    return '';
  }
}
