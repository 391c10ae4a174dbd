// Dictation: the composer's microphone. It records with MediaRecorder, shows
// the recording time, sends the recording to POST /transcribe (whisper.cpp on
// the host; the audio never leaves it) and hands the text back to the
// composer for the user to edit and send.

import { h, icon } from './dom.js';
import { api } from './conn.js';

// The containers the host converts, in order of preference.
const TYPES = ['audio/webm;codecs=opus', 'audio/ogg;codecs=opus', 'audio/mp4', 'audio/webm'];

let availability = null;

// speechStatus asks the host once whether transcription is configured.
export function speechStatus() {
  if (!availability) availability = api('/transcribe').catch(() => ({ enabled: false }));
  return availability;
}

export class Dictation {
  // onText receives the transcript; toast reports failures.
  constructor({ onText, toast }) {
    this.onText = onText;
    this.toast = toast;
    this.state = 'idle';
    this.timeEl = h('span', { class: 'dictation-time', 'aria-live': 'off' });
    this.button = h('button', { type: 'button', class: 'icon-button dictation', id: 'dictation', hidden: true,
      title: 'Dictate', 'aria-label': 'Dictate', 'aria-pressed': 'false', 'on:click': () => this.toggle() },
    icon('mic'), this.timeEl);
    if (typeof MediaRecorder === 'undefined' || !navigator.mediaDevices?.getUserMedia) return;
    speechStatus().then((s) => {
      this.button.hidden = !s.enabled;
      this.formats = s.formats || [];
    });
  }

  setState(state) {
    this.state = state;
    this.button.dataset.state = state;
    this.button.setAttribute('aria-pressed', state === 'recording' ? 'true' : 'false');
    const label = { idle: 'Dictate', recording: 'Stop and transcribe', transcribing: 'Transcribing…' }[state];
    this.button.title = label;
    this.button.setAttribute('aria-label', label);
    this.button.disabled = state === 'transcribing';
    if (state !== 'recording') this.timeEl.textContent = state === 'transcribing' ? '…' : '';
  }

  toggle() {
    if (this.state === 'recording') this.stop();
    else if (this.state === 'idle') this.start();
  }

  async start() {
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    } catch (err) {
      this.toast(`The microphone is not available: ${err.message}`);
      return;
    }
    const type = TYPES.find((t) => MediaRecorder.isTypeSupported(t)) || '';
    this.chunks = [];
    this.recorder = new MediaRecorder(stream, type ? { mimeType: type } : undefined);
    this.recorder.ondataavailable = (e) => { if (e.data.size) this.chunks.push(e.data); };
    this.recorder.onstop = () => {
      stream.getTracks().forEach((t) => t.stop());
      this.transcribe(new Blob(this.chunks, { type: this.recorder.mimeType || type || 'audio/webm' }));
    };
    this.started = Date.now();
    this.recorder.start(250);
    this.setState('recording');
    this.tick();
    this.timer = setInterval(() => this.tick(), 250);
  }

  tick() {
    const s = Math.floor((Date.now() - this.started) / 1000);
    this.timeEl.textContent = `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
  }

  stop() {
    clearInterval(this.timer);
    this.setState('transcribing');
    this.recorder.stop();
  }

  async transcribe(blob) {
    try {
      const res = await api('/transcribe', { method: 'POST', headers: { 'Content-Type': blob.type }, body: blob });
      if (res.text) this.onText(res.text);
      else this.toast('Nothing was heard in the recording.');
    } catch (err) {
      this.toast(`Transcription failed: ${err.message}`);
    } finally {
      this.setState('idle');
    }
  }
}
