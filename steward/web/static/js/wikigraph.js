// A small SVG graph renderer for the Wiki section (no library, no build
// step): a radial view of one page's related pages, or a force-directed
// layout of the whole wiki coloured by community. Nodes are links.

import { svg, h } from './dom.js';

const MAX_NODES = 250;

// drawGraph returns an <svg> figure. With center and neighbors it draws the
// page in the middle and its related pages around it (nearer = more
// relevant); with nodes and edges it lays out the most linked pages.
export function drawGraph({ center, neighbors, nodes, edges, href, size = 400 }) {
  const root = svg('svg', { class: 'wiki-graph', viewBox: `0 0 ${size} ${size}`, width: size, height: size, role: 'img',
    'aria-label': center ? `Pages related to ${center.title}` : 'Graph of the wiki' });
  const c = size / 2;
  if (center) {
    const max = Math.max(...neighbors.map((n) => n.relevance), 1);
    const placed = neighbors.map((n, i) => {
      const a = (2 * Math.PI * i) / neighbors.length - Math.PI / 2;
      const r = c * (0.88 - 0.45 * (n.relevance / max));
      return { ...n, x: c + r * Math.cos(a), y: c + r * Math.sin(a) };
    });
    for (const n of placed) root.append(svg('line', { x1: c, y1: c, x2: n.x, y2: n.y, class: n.directLink ? 'edge direct' : 'edge' }));
    root.append(node(c, c, center.title, href(center.path), 0, true));
    for (const n of placed) root.append(node(n.x, n.y, n.title, href(n.path), 1 + (n.directLink ? 0 : 1)));
    return root;
  }
  const keep = [...nodes.keys()].sort((a, b) => nodes[b].degree - nodes[a].degree).slice(0, MAX_NODES);
  const index = new Map(keep.map((k, i) => [k, i]));
  const pts = keep.map((k, i) => ({ ...nodes[k], x: c + (c * 0.8) * Math.cos(i * 2.399963), y: c + (c * 0.8) * Math.sin(i * 2.399963) * ((i % 7) / 7 + 0.3), vx: 0, vy: 0 }));
  const links = edges.filter((e) => index.has(e.from) && index.has(e.to)).map((e) => [index.get(e.from), index.get(e.to)]);
  // Fruchterman–Reingold: every pair repels (k²/d), linked pages attract
  // (d²/k), a weak pull keeps unlinked pages near the centre, and each step
  // moves a page at most the current temperature.
  // With k² = 0.2·area/n, a gravity of 2.2 balances the repulsion of the
  // whole graph at about 0.6 of the radius, whatever n is.
  const k = 0.45 * Math.sqrt((size * size) / Math.max(pts.length, 1));
  let temp = size / 8;
  for (let step = 0; step < 250; step++, temp *= 0.98) {
    for (const p of pts) { p.vx = (c - p.x) * 2.2; p.vy = (c - p.y) * 2.2; }
    for (let i = 0; i < pts.length; i++) {
      for (let j = i + 1; j < pts.length; j++) {
        const dx = pts[i].x - pts[j].x || 0.01, dy = pts[i].y - pts[j].y || 0.01;
        const d = Math.hypot(dx, dy);
        const f = (k * k) / d / d;
        pts[i].vx += dx * f; pts[i].vy += dy * f; pts[j].vx -= dx * f; pts[j].vy -= dy * f;
      }
    }
    for (const [a, b] of links) {
      const dx = pts[a].x - pts[b].x, dy = pts[a].y - pts[b].y;
      const d = Math.hypot(dx, dy) || 0.01;
      const f = d / k;
      pts[a].vx -= dx * f; pts[a].vy -= dy * f; pts[b].vx += dx * f; pts[b].vy += dy * f;
    }
    for (const p of pts) {
      const v = Math.hypot(p.vx, p.vy) || 1;
      const m = Math.min(v, temp) / v;
      p.x = Math.min(size - 10, Math.max(10, p.x + p.vx * m));
      p.y = Math.min(size - 10, Math.max(10, p.y + p.vy * m));
    }
  }
  for (const [a, b] of links) root.append(svg('line', { x1: pts[a].x, y1: pts[a].y, x2: pts[b].x, y2: pts[b].y, class: 'edge' }));
  for (const p of pts) root.append(node(p.x, p.y, p.title, href(p.path), 2, false, `c${p.community % 10}`, pts.length > 40));
  return h('figure', { class: 'wiki-graph-figure' }, root, h('figcaption', { class: 'muted small' },
    nodes.length > MAX_NODES ? `The ${MAX_NODES} most linked of ${nodes.length} pages; colour = community.` : 'Colour = community.'));
}

function node(x, y, title, href, level, main = false, community = null, quiet = false) {
  const a = svg('a', { href, class: ['graph-node', main && 'main', community], 'aria-label': title });
  a.append(svg('circle', { cx: x, cy: y, r: main ? 9 : level === 2 ? 5 : 7 }), svg('title', null, title));
  if (!quiet) a.append(svg('text', { x: x + 9, y: y + 4 }, title.length > 28 ? `${title.slice(0, 27)}…` : title));
  return a;
}
