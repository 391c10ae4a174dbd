// Live freshness hints. The socket authenticates with a one-time ticket
// (never the token in a URL), holds acknowledged exact-key leases (card,
// conversation, exchange) and delivers lossy hints: views refetch REST,
// which stays authoritative. On reconnect, leases are re-sent and every
// mounted view refetches.
import { call } from './api.js';

export class Live {
  constructor({ onStatus }) {
    this.onStatus = onStatus;
    this.ws = null;
    this.seq = 0;
    this.leases = new Map(); // "topic|key" → { id, count, topic, key }
    this.pending = new Map(); // ack id → resolve
    this.listeners = new Set(); // { topic, key, fn }
    this.reconnectors = new Set();
    this.backoff = 500;
    this.stopped = false;
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    this.ws?.close();
  }

  async connect() {
    if (this.stopped) return;
    this.onStatus('connecting');
    let ticket;
    try {
      ticket = (await call('auth.wsTicket')).ticket;
    } catch {
      this.retry();
      return;
    }
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    let ws;
    try {
      ws = new WebSocket(`${proto}//${location.host}/api/live?ticket=${encodeURIComponent(ticket)}`);
    } catch {
      this.retry();
      return;
    }
    this.ws = ws;
    let hello = false;
    ws.onmessage = (ev) => {
      let m;
      try { m = JSON.parse(ev.data); } catch { return; }
      if (m.hello) {
        hello = true;
        this.backoff = 500;
        this.onStatus('live');
        const acks = [...this.leases.values()].map((l) => this.send('subscribe', l));
        Promise.all(acks).then(() => this.reconnectors.forEach((fn) => fn()));
        return;
      }
      const id = m.ack ?? m.nack;
      if (id !== undefined) {
        this.pending.get(id)?.();
        this.pending.delete(id);
        return;
      }
      for (const h of m.hints || []) {
        for (const l of this.listeners) {
          if (l.topic === h.topic && (l.key === null || l.key === (h.key || ''))) l.fn(h);
        }
      }
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      for (const resolve of this.pending.values()) resolve();
      this.pending.clear();
      this.onStatus(hello ? 'reconnecting' : 'offline');
      this.retry();
    };
  }

  retry() {
    if (this.stopped) return;
    setTimeout(() => this.connect(), this.backoff);
    this.backoff = Math.min(this.backoff * 2, 10000);
  }

  send(op, lease) {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return Promise.resolve();
    if (op === 'subscribe') lease.id = ++this.seq;
    const id = lease.id;
    return new Promise((resolve) => {
      if (op === 'subscribe') this.pending.set(id, resolve);
      ws.send(JSON.stringify({ op, id, topic: lease.topic, key: lease.key }));
      if (op !== 'subscribe') resolve();
    });
  }

  // lease holds an exact key; the returned promise resolves once the
  // server acknowledged it (subscribe, then fetch). release() drops it.
  lease(topic, key) {
    const k = `${topic}|${key}`;
    let l = this.leases.get(k);
    let acked = Promise.resolve();
    if (!l) {
      l = { topic, key, count: 0, id: 0 };
      this.leases.set(k, l);
      acked = this.send('subscribe', l);
    }
    l.count++;
    let released = false;
    return {
      acked,
      release: () => {
        if (released) return;
        released = true;
        if (--l.count === 0 && this.leases.get(k) === l) {
          this.leases.delete(k);
          this.send('unsubscribe', l);
        }
      },
    };
  }

  // on calls fn for hints of a topic (and exact key, unless key is null).
  on(topic, key, fn) {
    const l = { topic, key, fn };
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  // onReconnect calls fn after a reconnect's leases are acknowledged.
  onReconnect(fn) {
    this.reconnectors.add(fn);
    return () => this.reconnectors.delete(fn);
  }
}
