// The first-run screen: with no usable chat model, the user picks an
// OpenAI-compatible provider; the host tests it with one real request,
// writes gateway.yaml and the key, and reloads the gateway.

import { h } from './dom.js';
import { api } from './conn.js';

// status returns the host's GET /setup answer, or null when the host has
// no set-up routes.
export async function status() {
  try {
    return await api('/setup');
  } catch {
    return null;
  }
}

export function render(app) {
  const field = (id, label, attrs = {}, hint = '') => {
    const input = h('input', { id, name: id, autocomplete: 'off', spellcheck: 'false', ...attrs });
    const row = [h('label', { for: id }, label), input];
    if (hint) row.push(h('p', { class: 'muted hint' }, hint));
    return [input, ...row];
  };
  const [baseURL, ...baseRow] = field('setup-base-url', 'Base URL (OpenAI-compatible)', { type: 'url', required: true, placeholder: 'https://api.openai.com/v1' },
    'OpenAI, DeepSeek (https://api.deepseek.com/v1), OpenRouter, or a local Ollama (http://127.0.0.1:11434/v1).');
  const [key, ...keyRow] = field('setup-key', 'API key', { type: 'password', placeholder: 'empty for a local server' },
    'Stored in config.env in your Steward folder (readable only by you); never shown again.');
  const msg = h('p', { id: 'setup-message', role: 'alert' });
  const tierInputs = {};
  const tierRows = h('div', { class: 'setup-tiers' });
  const submit = h('button', { type: 'submit', class: 'primary', id: 'setup-submit' }, 'Test and save');
  const form = h('form', { class: 'pair-form setup-form', 'on:submit': async (e) => {
    e.preventDefault();
    const models = {};
    for (const [t, input] of Object.entries(tierInputs)) if (input.value.trim()) models[t] = input.value.trim();
    submit.disabled = true;
    msg.className = 'muted';
    msg.textContent = 'Sending one test request to the provider…';
    try {
      await api('/setup', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ baseUrl: baseURL.value, apiKey: key.value, models }) });
      msg.className = 'ok';
      msg.textContent = 'The provider answered. Saved — you can chat now.';
      app.needsSetup = false;
      document.documentElement.dataset.setup = 'done'; // observable after the screen has gone
      setTimeout(() => app.go('#/new'), 800);
    } catch (err) {
      msg.className = 'error';
      msg.textContent = err.message;
    }
    submit.disabled = false;
  } },
  h('h2', { id: 'setup-title' }, 'Choose a model provider'),
  h('p', { id: 'setup-problem', class: 'muted' }, 'Steward has no usable chat model yet.'),
  ...baseRow, ...keyRow, tierRows, msg,
  h('div', { class: 'actions' }, submit));
  const page = h('section', { class: 'page pair-view setup-view', 'aria-labelledby': 'setup-title' }, form);
  status().then((s) => {
    if (!s) return;
    if (s.status?.problem) form.querySelector('#setup-problem').textContent = `${s.status.problem[0].toUpperCase()}${s.status.problem.slice(1)}.`;
    tierRows.append(h('p', { class: 'setup-tiers-intro' }, h('strong', null, 'Model names'), ` — the provider's names for each tier. ${s.chatTier} is the one chats use; the others default to it.`));
    for (const t of s.tiers) {
      const [input, ...row] = field(`setup-${t}`, t === s.chatTier ? `${t} (chats)` : t, t === s.chatTier ? { required: true, placeholder: 'e.g. gpt-4o-mini' } : { placeholder: `same as ${s.chatTier}` });
      tierInputs[t] = input;
      tierRows.append(...row);
    }
    page.dataset.loaded = '1';
  });
  setTimeout(() => baseURL.focus(), 0);
  return page;
}
