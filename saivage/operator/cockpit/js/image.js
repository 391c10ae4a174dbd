// imagePreview shows one recorded image occurrence (session, segment, row,
// index) in a modal dialog. The dialog owns one abortable read and one
// object URL, both ended when it closes; Fit and 1:1 switch the scale.
// Opening it is the only thing that fetches pixels.
import { call } from './api.js';
import { h } from './dom.js';

export function imagePreview({ sessionId, segment, row, index, width, height, opener }) {
  const ctl = new AbortController();
  let url = null;
  const status = h('p', { class: 'small', role: 'status' }, 'Loading…');
  const frame = h('div', { class: 'image-frame fit' });
  const scale = h('button', { type: 'button', class: 'image-scale' }, '1:1');
  scale.addEventListener('click', () => {
    const fit = frame.classList.toggle('fit');
    scale.textContent = fit ? '1:1' : 'Fit';
  });
  const close = h('button', { type: 'button', class: 'image-close' }, 'Close');
  const dlg = h('dialog', { class: 'image-preview', 'aria-label': `Image ${index + 1} of row ${row}` },
    h('div', { class: 'row' }, h('strong', {}, `Image ${index + 1} · ${width}×${height}`), scale, close), status, frame);
  const done = () => {
    ctl.abort();
    if (url) URL.revokeObjectURL(url);
    url = null;
    dlg.remove();
    // A refreshed transcript may have replaced the button: focus its
    // successor (same row and index) then.
    const back = opener?.isConnected ? opener
      : document.querySelector(`.image-occurrence[data-row="${CSS.escape(row)}"][data-index="${index}"]`);
    back?.focus();
  };
  close.addEventListener('click', () => dlg.close());
  dlg.addEventListener('close', done);
  document.body.append(dlg);
  dlg.showModal();
  call('agents.conversationImage', { params: { id: sessionId }, query: { segment, row, index }, signal: ctl.signal, raw: true })
    .then((res) => res.blob())
    .then((blob) => {
      if (ctl.signal.aborted) return;
      url = URL.createObjectURL(blob);
      const img = h('img', { src: url, alt: `Image ${index + 1} of the result`, class: 'preview-img' });
      img.addEventListener('load', () => { status.textContent = ''; dlg.dataset.loaded = 'true'; }, { once: true });
      frame.append(img);
    })
    .catch((e) => {
      if (!ctl.signal.aborted) status.textContent = `The image could not be read: ${e.message}`;
    });
  return dlg;
}
