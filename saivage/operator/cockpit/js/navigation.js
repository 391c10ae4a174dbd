// The Analyst's navigate_workspace and navigate_back results move the
// cockpit, whatever view is open. Only results recorded after the cockpit
// loaded act: the first read of the Analyst session is a baseline, so a
// reload never replays old navigation. A failed call navigates nowhere.
import { call } from './api.js';

const NAV_TOOLS = new Set(['navigate_workspace', 'navigate_back']);

// navigationOf returns the {intent, route} a tool result row asks for, or
// null (not a navigation result, failed, or unreadable).
export function navigationOf(row) {
  if (row.kind !== 'tool_result' || !NAV_TOOLS.has(row.name)) return null;
  const c = row.content || {};
  if (c.is_error) return null;
  try {
    const nav = JSON.parse(c.content).navigation;
    if (nav?.intent === 'back') return { intent: 'back' };
    if (nav?.intent === 'open' && typeof nav.route === 'string' && nav.route.startsWith('#/')) return { intent: 'open', route: nav.route };
  } catch { /* not ours */ }
  return null;
}

export function watchNavigation(ctx) {
  let session = null;
  let lease = null;
  let off = null;
  let seen = null; // row ids of navigation results already known
  let running = null;
  const read = async () => {
    if (running) { running.again = true; return; }
    running = { again: false };
    try {
      do {
        running.again = false;
        const id = session;
        let r;
        try { r = await call('agents.conversation', { params: { id } }); } catch { continue; }
        if (id !== session) continue;
        const navs = r.rows.filter((row) => navigationOf(row));
        if (seen === null) {
          seen = new Set(navs.map((row) => row.id));
          continue;
        }
        for (const row of navs) {
          if (seen.has(row.id)) continue;
          seen.add(row.id);
          const nav = navigationOf(row);
          document.documentElement.dataset.navigated = row.id;
          if (nav.intent === 'back') history.back();
          else if (location.hash !== nav.route) ctx.navigate(nav.route);
        }
      } while (running.again);
    } finally {
      running = null;
    }
  };
  const follow = async () => {
    let info;
    try { info = await call('chat.get'); } catch { return; }
    if (info.session === session) return;
    lease?.release(); off?.();
    session = info.session;
    seen = null;
    lease = ctx.live.lease('conversation', session);
    off = ctx.live.on('conversation', session, read);
    await lease.acked;
    await read();
  };
  ctx.live.on('analyst', null, follow);
  ctx.live.onReconnect(read);
  follow();
}
