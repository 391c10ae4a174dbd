// The System page's speech settings: the default speech rate of calls and a
// voice per language, with a preview rendered by the host (macOS say, Linux
// espeak-ng) and played here.

import { h, clear } from './dom.js';
import { api } from './conn.js';

const LANGS = [['en', 'English'], ['it', 'Italian']];
const SAMPLE = { en: 'Hello, this is Steward. Your train leaves at nine fifteen.', it: 'Ciao, sono Steward. Il treno parte alle nove e un quarto.' };

export function controls() {
  const box = h('section', { class: 'speech-settings', 'aria-labelledby': 'speech-title' });
  const load = async () => {
    let v;
    try {
      v = await api('/settings/speech');
    } catch (err) {
      clear(box).append(h('h3', { id: 'speech-title' }, 'Speech'), h('p', { class: 'error' }, `Could not load the speech settings: ${err.message}`));
      return;
    }
    draw(v);
  };
  const draw = (v) => {
    const msg = h('p', { id: 'speech-message', role: 'status' });
    const rate = h('input', { id: 'speech-rate', type: 'range', min: v.minRate, max: v.maxRate, step: 5, value: v.settings.rate });
    const rateOut = h('output', { for: 'speech-rate', id: 'speech-rate-value' }, `${v.settings.rate} words per minute`);
    rate.addEventListener('input', () => { rateOut.textContent = `${rate.value} words per minute`; });
    const player = h('audio', { id: 'speech-player', controls: true, hidden: true });
    const selects = {};
    const rows = LANGS.map(([code, name]) => {
      const sel = h('select', { id: `speech-voice-${code}` },
        h('option', { value: '' }, 'Automatic'),
        ...v.voices.filter((x) => x.language === code).map((x) => h('option', { value: x.name }, x.name)));
      sel.value = v.settings.voices?.[code] || '';
      selects[code] = sel;
      const preview = h('button', { type: 'button', class: 'speech-preview', dataset: { lang: code }, 'on:click': async () => {
        preview.disabled = true;
        msg.textContent = 'Rendering…';
        try {
          const res = await api('/settings/speech/preview', { method: 'POST', raw: true, headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({ text: SAMPLE[code], voice: sel.value, rate: Number(rate.value) }) });
          const blob = await res.blob();
          if (player.src) URL.revokeObjectURL(player.src);
          player.src = URL.createObjectURL(blob);
          player.dataset.bytes = String(blob.size);
          player.hidden = false;
          player.play().catch(() => {});
          msg.textContent = '';
        } catch (err) {
          msg.textContent = `Preview failed: ${err.message}`;
        }
        preview.disabled = false;
      } }, 'Preview');
      return h('div', { class: 'inline-form' }, h('label', { for: `speech-voice-${code}` }, `${name} voice`), sel, preview);
    });
    const form = h('form', { class: 'speech-form', 'on:submit': async (e) => {
      e.preventDefault();
      const body = { rate: Number(rate.value), voices: Object.fromEntries(LANGS.map(([c]) => [c, selects[c].value])) };
      try {
        await api('/settings/speech', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
        msg.textContent = 'Saved. Calls use these settings from the next sentence.';
        box.dataset.saved = String(Number(box.dataset.saved || 0) + 1);
      } catch (err) {
        msg.textContent = `Not saved: ${err.message}`;
      }
    } },
    h('div', { class: 'inline-form' }, h('label', { for: 'speech-rate' }, 'Speech rate'), rate, rateOut),
    ...rows,
    h('button', { type: 'submit' }, 'Save'));
    clear(box).append(h('h3', { id: 'speech-title' }, 'Speech'),
      ...(v.problem ? [h('p', { class: 'muted small', id: 'speech-problem' }, v.problem)] : []),
      form, player, msg,
      h('p', { class: 'muted small' }, 'Used by voice calls. During a call the agent may change only that call’s rate; saving new defaults from a chat asks for your approval.'));
    box.dataset.loaded = '1';
  };
  load();
  return box;
}
