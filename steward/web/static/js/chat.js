// The chat view: transcript, streaming assistant text, tool/approval/question
// cards, the composer with uploads, copy-as-JSON and abort.

import { h, clear, fmtBytes, icon } from './dom.js';
import { renderMarkdown } from './markdown.js';
import { upload, download } from './conn.js';
import { Dictation } from './dictation.js';
import {
  toolCard, updateToolCard, approvalCard, resolveApprovalCard, showEffective, questionCard, answeredQuestion,
} from './cards.js';

const STORED = new Set(['user.message.saved', 'assistant.message', 'tool.start', 'tool.result', 'tool.error',
  'approval.request', 'approval.resolved', 'question', 'turn.done', 'conversation.summarised']);

export class ChatView {
  // app gives conn, chats (Map), pending (Map approvalId → request), toast().
  constructor(app, chatId) {
    this.app = app;
    this.chatId = chatId;
    this.entries = [];
    this.running = false;
    this.stream = null; // {el, text}: the assistant message being streamed
    this.toolEls = new Map(); // callId → tool card element
    this.toolData = new Map(); // callId → tool card data
    this.approvalEls = new Map(); // approvalId → approval card
    this.chips = [];
    this.renderQueued = false;
    this.stored = 0; // live frames of kinds the transcript stores (see App.openChat)
    this.liveQuestions = new Set(); // questionIds the host still waits for
    this.build();
  }

  build() {
    const chat = this.app.chats.get(this.chatId);
    this.titleEl = h('h2', { class: 'chat-title', id: 'chat-title' }, chat ? chat.title : 'New chat');
    this.stopBtn = h('button', { type: 'button', class: 'danger', hidden: true, 'on:click': () => this.abort() }, icon('stop'), 'Stop');
    this.log = h('div', { class: 'transcript', role: 'log', 'aria-live': 'polite', 'aria-labelledby': 'chat-title' });
    this.textarea = h('textarea', {
      id: 'composer-input', rows: 1, placeholder: 'Message Steward', 'aria-label': 'Message',
      'on:keydown': (e) => {
        if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
          e.preventDefault();
          this.send();
        }
      },
      'on:input': () => this.autosize(),
    });
    this.fileInput = h('input', { type: 'file', multiple: true, id: 'file-input', class: 'visually-hidden',
      'aria-label': 'Attach files', 'on:change': () => {
        this.addFiles(this.fileInput.files);
        this.fileInput.value = '';
      } });
    this.chipsEl = h('ul', { class: 'chips', 'aria-label': 'Attached files' });
    this.sendBtn = h('button', { type: 'submit', class: 'primary send', 'aria-label': 'Send' }, 'Send');
    this.dictation = new Dictation({ onText: (t) => this.insertText(t), toast: (m) => this.app.toast(m) });
    this.form = h('form', { class: 'composer', 'on:submit': (e) => {
      e.preventDefault();
      this.send();
    } },
    this.chipsEl,
    h('div', { class: 'composer-row' },
      this.fileInput,
      h('label', { for: 'file-input', class: 'button icon-button', title: 'Attach files' }, icon('clip'), h('span', { class: 'visually-hidden' }, 'Attach')),
      this.textarea, this.dictation.button, this.stopBtn, this.sendBtn));
    const actions = this.chatId ? [
      h('button', { type: 'button', 'on:click': () => this.rename() }, 'Rename'),
      h('button', { type: 'button', 'on:click': () => this.copy() }, 'Copy JSON'),
      this.deleteBtn = h('button', { type: 'button', class: 'danger', 'on:click': () => this.remove() }, 'Delete'),
    ] : [];
    this.header = h('header', { class: 'view-header' }, this.titleEl, h('div', { class: 'header-actions' }, actions));
    this.el = h('section', { class: 'chat-view', 'aria-label': 'Chat' }, this.header, this.log, this.form);
    this.el.addEventListener('dragover', (e) => {
      if (![...(e.dataTransfer?.types || [])].includes('Files')) return;
      e.preventDefault();
      this.el.classList.add('dragging');
    });
    this.el.addEventListener('dragleave', (e) => {
      if (e.target === this.el || !this.el.contains(e.relatedTarget)) this.el.classList.remove('dragging');
    });
    this.el.addEventListener('drop', (e) => {
      e.preventDefault();
      this.el.classList.remove('dragging');
      if (e.dataTransfer?.files?.length) this.addFiles(e.dataTransfer.files);
    });
    if (!this.chatId) this.log.append(h('div', { class: 'empty' }, h('p', null, 'Ask about your mail, calendar, contacts and files.'), h('p', { class: 'muted' }, 'Enter sends, Shift+Enter adds a line.')));
    this.updateComposer();
  }

  autosize() {
    const ta = this.textarea;
    ta.style.height = 'auto';
    const want = ta.scrollHeight + 2; // + the borders (border-box sizing)
    ta.style.height = `${Math.min(want, 240)}px`;
    ta.style.overflowY = want > 240 ? 'auto' : 'hidden';
  }

  // insertText puts dictated text at the cursor, for the user to edit and send.
  insertText(text) {
    const ta = this.textarea;
    const start = ta.selectionStart ?? ta.value.length;
    const end = ta.selectionEnd ?? ta.value.length;
    const before = ta.value.slice(0, start);
    const sep = before && !/\s$/.test(before) ? ' ' : '';
    ta.value = before + sep + text + ta.value.slice(end);
    const at = (before + sep + text).length;
    ta.setSelectionRange(at, at);
    ta.focus();
    this.autosize();
  }

  setTitle(t) {
    this.titleEl.textContent = t;
  }

  updateComposer() {
    const online = this.app.conn.status === 'open';
    const uploading = this.chips.some((c) => c.state === 'uploading');
    this.sendBtn.disabled = !online || this.running || uploading;
    this.sendBtn.hidden = this.running;
    this.stopBtn.hidden = !this.running;
    this.el.dataset.running = this.running ? '1' : '0';
  }

  // load replaces the view's content with a chat.transcript frame.
  load(t) {
    // Text streamed before the transcript arrived is not in it (only whole
    // messages are stored): keep it while the turn runs.
    const stream = t.running ? this.stream : null;
    clear(this.log);
    this.toolEls.clear();
    this.toolData.clear();
    this.approvalEls.clear();
    this.stream = null;
    this.entries = t.entries || [];
    const pending = new Map((t.pendingApprovals || []).map((p) => [p.approvalId, p]));
    this.liveQuestions = new Set((t.pendingQuestions || []).map((q) => q.questionId));
    for (const p of pending.values()) this.app.pending.set(p.approvalId, p);
    for (const e of this.entries) this.renderEntry(e, pending);
    // Pending approvals whose entry is missing (should not happen) still get a card.
    for (const p of pending.values()) if (!this.approvalEls.has(p.approvalId)) this.addApproval(p, true);
    if (stream) {
      this.stream = stream;
      this.log.append(stream.el);
    }
    this.running = !!t.running;
    this.updateComposer();
    this.scroll(true);
  }

  renderEntry(e, pending) {
    const d = e.data || {};
    switch (e.kind) {
      case 'user': this.log.append(this.userBubble(d)); break;
      case 'assistant': this.log.append(this.assistantBubble(d.text, d.messageId)); break;
      case 'tool': {
        const el = toolCard(d);
        this.toolEls.set(d.callId, el);
        this.toolData.set(d.callId, d);
        this.log.append(el);
        if (d.effectiveArgs) showEffective(this.approvalForCall(d.callId), d.effectiveArgs);
        break;
      }
      case 'approval': {
        const live = pending.get(d.approvalId);
        const el = this.addApproval(live || d, !!live);
        if (!live) resolveApprovalCard(el, d.status === 'pending' ? 'expired' : d.status, { args: d.editedArgs, note: d.note });
        const tool = this.toolData.get(d.callId);
        if (tool?.effectiveArgs) showEffective(el, tool.effectiveArgs);
        break;
      }
      case 'question': {
        // Answerable only while the host still waits for it.
        const el = this.questionEl(d);
        if (d.status === 'answered') answeredQuestion(el, d.answer || '');
        else if (!this.liveQuestions.has(d.questionId)) answeredQuestion(el, d.status === 'timeout' ? 'no answer in time' : 'no longer waiting', '');
        this.log.append(el);
        break;
      }
      case 'error': this.log.append(this.errorLine(d)); break;
      case 'control': this.log.append(h('div', { class: 'control-note', role: 'note' }, 'Steward started this call on its own; the words below are the conversation.')); break;
      case 'summary': this.log.append(this.summaryEntry(d)); break;
      default: break;
    }
  }

  // questionEl is an ask_user question's card; an answer goes to the host.
  questionEl(q) {
    return questionCard(q, (answer) => {
      if (this.app.conn.send({ type: 'question.answer', questionId: q.questionId, answer })) {
        answeredQuestion(this.log.querySelector(`[data-question-id="${CSS.escape(q.questionId)}"]`), answer);
      }
    });
  }

  approvalForCall(callId) {
    for (const el of this.approvalEls.values()) if (el.dataset.callId === callId) return el;
    return null;
  }

  addApproval(req, pending) {
    const el = approvalCard(req, { pending, respond: (decision, opts) => this.respond(req.approvalId, decision, opts) });
    this.approvalEls.set(req.approvalId, el);
    this.log.append(el);
    return el;
  }

  userBubble(d) {
    const files = (d.files || []).map((f) => h('li', null, h('button', {
      type: 'button', class: 'chip', title: `Download ${f.name}`,
      'on:click': () => download(f.token, f.name).catch((err) => this.app.toast(`Could not open ${f.name}: ${err.message}`)),
    }, icon('clip'), ' ', f.name, h('span', { class: 'muted' }, ` ${fmtBytes(f.size)}`))));
    return h('div', { class: 'msg user', dataset: { messageId: d.messageId || '' } },
      files.length ? h('ul', { class: 'chips', 'aria-label': 'Files' }, files) : null,
      d.text ? h('div', { class: 'bubble' }, d.text) : null);
  }

  assistantBubble(text, messageId) {
    const body = h('div', { class: 'bubble md' }, renderMarkdown(text));
    return h('div', { class: 'msg assistant', dataset: { messageId: messageId || '' } }, body);
  }

  // summaryEntry marks where the model's memory of the chat was summarised
  // to fit its context; it expands to the summary the model now works from.
  summaryEntry(d) {
    return h('details', { class: 'msg summary', dataset: { entryId: d.entryId || '' } },
      h('summary', null, 'Earlier conversation summarised',
        h('span', { class: 'muted' }, ` (${d.coveredMessages || 0} messages)`)),
      h('div', { class: 'bubble md' }, renderMarkdown(d.summary || '')));
  }

  // errorLine shows how a turn ended without an answer: "Stopped." for the
  // user's stop, else a card with the plain cause and the fix, the
  // technical error one click away.
  errorLine(d) {
    if (d.aborted) return h('div', { class: 'msg notice', role: 'status' }, 'Stopped.');
    const link = 'set-up screen (#/setup)';
    const fix = (d.fix || '').split(/(set-up screen \(#\/setup\))/).map((part) => (part === link ? h('a', { href: '#/setup' }, 'set-up screen') : part));
    return h('div', { class: 'msg turn-error', role: 'alert' },
      h('p', { class: 'turn-error-cause' }, icon('alert'), ' ', d.cause || 'The turn failed.'),
      d.fix ? h('p', { class: 'turn-error-fix' }, ...fix) : null,
      d.error ? h('details', { class: 'turn-error-details' }, h('summary', null, 'Details'), h('pre', null, d.error)) : null);
  }

  scroll(force) {
    const nearBottom = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 120;
    if (force || nearBottom) this.log.scrollTop = this.log.scrollHeight;
  }

  // onFrame applies a live frame of this chat.
  onFrame(f) {
    if (STORED.has(f.type)) this.stored++;
    switch (f.type) {
      case 'user.message.saved':
        this.log.querySelector('.empty')?.remove();
        this.entries.push({ id: f.messageId, kind: 'user', at: new Date().toISOString(), data: f });
        this.log.append(this.userBubble(f));
        this.running = true;
        this.updateComposer();
        this.scroll(true);
        break;
      case 'assistant.delta':
        if (!this.stream) {
          const el = this.assistantBubble('', '');
          el.classList.add('streaming');
          this.stream = { el, text: '' };
          this.log.append(el);
        }
        this.stream.text += f.text;
        this.queueStreamRender();
        break;
      case 'assistant.message': {
        // Already in the transcript read while the frame was on its way.
        if (this.entries.some((e) => e.kind === 'assistant' && e.data?.messageId === f.messageId)) {
          this.stream?.el.remove();
          this.stream = null;
          break;
        }
        let el = this.stream?.el;
        this.stream = null;
        if (!el) {
          el = this.assistantBubble('', f.messageId);
          this.log.append(el);
        }
        el.classList.remove('streaming');
        el.dataset.messageId = f.messageId;
        el.querySelector('.bubble').replaceChildren(renderMarkdown(f.text));
        this.entries.push({ id: f.messageId, kind: 'assistant', at: new Date().toISOString(), data: f });
        this.scroll();
        break;
      }
      case 'tool.start':
      case 'tool.result':
      case 'tool.error':
        this.onTool(f);
        break;
      case 'conversation.summarised': {
        this.entries.push({ id: f.entryId, kind: 'summary', at: new Date().toISOString(), data: f });
        const el = this.summaryEntry(f);
        // Before the reply being streamed, which comes after it.
        if (this.stream) this.log.insertBefore(el, this.stream.el); else this.log.append(el);
        break;
      }
      case 'approval.request':
        if (!this.approvalEls.has(f.approvalId)) {
          this.entries.push({ id: f.approvalId, kind: 'approval', at: new Date().toISOString(),
            data: { approvalId: f.approvalId, callId: f.callId, tool: f.tool, args: f.args, status: 'pending' } });
          this.addApproval(f, true);
          this.scroll(true);
        }
        break;
      case 'approval.resolved': {
        const e = this.entries.find((x) => x.kind === 'approval' && x.data.approvalId === f.approvalId);
        if (e) Object.assign(e.data, { status: f.verdict, note: f.note, editedArgs: f.args });
        resolveApprovalCard(this.approvalEls.get(f.approvalId), f.verdict, { args: f.args, note: f.note });
        break;
      }
      case 'question':
        if (!this.log.querySelector(`[data-question-id="${CSS.escape(f.questionId)}"]`)) {
          this.log.append(this.questionEl(f));
          this.scroll(true);
        }
        break;
      case 'turn.done':
        if (this.stream) {
          this.stream.el.classList.remove('streaming');
          this.stream = null;
        }
        // The transcript may have been read after the host stored this
        // turn's error and before this frame arrived: show it once.
        if (!f.ok && !this.entries.some((e) => e.kind === 'error' && e.data?.turnId && e.data.turnId === f.turnId)) {
          const d = { turnId: f.turnId, error: f.error, aborted: f.aborted, cause: f.cause, fix: f.fix };
          this.entries.push({ id: `err-${f.turnId}`, kind: 'error', at: new Date().toISOString(), data: d });
          this.log.append(this.errorLine(d));
        }
        this.running = false;
        this.updateComposer();
        this.scroll();
        break;
      default:
        break;
    }
  }

  queueStreamRender() {
    if (this.renderQueued) return;
    this.renderQueued = true;
    requestAnimationFrame(() => {
      this.renderQueued = false;
      if (!this.stream) return;
      this.stream.el.querySelector('.bubble').replaceChildren(renderMarkdown(this.stream.text));
      this.scroll();
    });
  }

  onTool(f) {
    // Text streamed before a tool call belongs to that step's message.
    if (this.stream && f.type === 'tool.start') {
      this.stream.el.classList.remove('streaming');
      this.stream = null;
    }
    const card = {
      callId: f.callId, name: f.name, args: f.args, status: f.status, effectiveArgs: f.effectiveArgs, content: f.content,
      isError: f.isError, kind: f.kind, data: f.data, error: f.error, durationMs: f.durationMs,
    };
    let e = this.entries.find((x) => x.kind === 'tool' && x.data.callId === f.callId);
    if (!e) {
      e = { id: `tool-${f.callId}`, kind: 'tool', at: new Date().toISOString(), data: card };
      this.entries.push(e);
    } else e.data = card;
    this.toolData.set(f.callId, card);
    let el = this.toolEls.get(f.callId);
    if (!el) {
      el = toolCard(card);
      this.toolEls.set(f.callId, el);
      this.log.append(el);
    } else updateToolCard(el, card);
    if (card.effectiveArgs) showEffective(this.approvalForCall(f.callId), card.effectiveArgs);
    this.scroll();
  }

  respond(approvalId, decision, { args, note } = {}) {
    const frame = { type: 'approval.respond', approvalId, decision };
    if (args) frame.args = args;
    if (note) frame.note = note;
    if (!this.app.conn.send(frame)) {
      this.app.toast('Not connected: the answer was not sent. It will be possible again after reconnecting.');
      return;
    }
    this.app.pending.delete(approvalId);
    const el = this.approvalEls.get(approvalId);
    if (el) {
      el.setPending(false);
      el.querySelector('.outcome').textContent = 'Sent…';
    }
    this.app.renderChatList();
  }

  async send() {
    const text = this.textarea.value.trim();
    const files = this.chips.filter((c) => c.state === 'done').map((c) => c.file.token);
    if ((!text && files.length === 0) || this.sendBtn.disabled) return;
    let chatId = this.chatId;
    if (!chatId) {
      try {
        const title = (text || this.chips[0]?.file.name || 'New chat').split('\n')[0].slice(0, 60);
        const f = await this.app.conn.request({ type: 'chat.create', title });
        chatId = f.chat.id;
      } catch (err) {
        this.app.toast(`Could not create a chat: ${err.message}`);
        return;
      }
    }
    const frame = { type: 'user.message', chatId, text };
    if (files.length) frame.files = files;
    if (!this.app.conn.send(frame)) {
      this.app.toast('Not connected: the message was not sent.');
      return;
    }
    this.textarea.value = '';
    this.autosize();
    this.chips = [];
    this.renderChips();
    this.running = true;
    this.updateComposer();
    if (chatId !== this.chatId) this.app.go(`#/c/${chatId}`);
  }

  abort() {
    if (!this.app.conn.send({ type: 'abort', chatId: this.chatId })) this.app.toast('Not connected.');
  }

  addFiles(list) {
    for (const file of list) {
      const chip = { name: file.name, size: file.size, state: 'uploading', file: null, error: '' };
      this.chips.push(chip);
      upload(file).then((f) => {
        chip.file = f;
        chip.state = 'done';
      }, (err) => {
        chip.state = 'error';
        chip.error = err.message;
      }).finally(() => {
        this.renderChips();
        this.updateComposer();
      });
    }
    this.renderChips();
    this.updateComposer();
  }

  renderChips() {
    clear(this.chipsEl).append(...this.chips.map((c) => h('li', { class: `chip chip-${c.state}`, dataset: { state: c.state } },
      icon(c.state === 'uploading' ? 'clock' : c.state === 'error' ? 'alert' : 'clip'), ' ',
      h('span', { class: 'chip-name' }, c.name), ' ', h('span', { class: 'muted' }, c.state === 'error' ? c.error : fmtBytes(c.size)),
      h('button', { type: 'button', class: 'chip-remove', 'aria-label': `Remove ${c.name}`, 'on:click': () => {
        this.chips = this.chips.filter((x) => x !== c);
        this.renderChips();
        this.updateComposer();
      } }, '×'))));
  }

  rename() {
    const chat = this.app.chats.get(this.chatId);
    const input = h('input', { type: 'text', value: chat?.title || '', 'aria-label': 'Chat title', maxlength: 200 });
    const done = (save) => {
      const t = input.value.trim();
      if (save && t && t !== chat?.title) this.app.conn.send({ type: 'chat.rename', chatId: this.chatId, title: t });
      form.replaceWith(this.titleEl);
    };
    const form = h('form', { class: 'inline-form rename', 'on:submit': (e) => {
      e.preventDefault();
      done(true);
    } }, input, h('button', { type: 'submit' }, 'Save'), h('button', { type: 'button', 'on:click': () => done(false) }, 'Cancel'));
    input.addEventListener('keydown', (e) => e.key === 'Escape' && done(false));
    this.titleEl.replaceWith(form);
    input.select();
  }

  remove() {
    // A second click within five seconds confirms: no modal dialogs.
    if (this.deleteBtn.dataset.confirm !== '1') {
      this.deleteBtn.dataset.confirm = '1';
      this.deleteBtn.textContent = 'Confirm delete';
      setTimeout(() => {
        this.deleteBtn.dataset.confirm = '';
        this.deleteBtn.textContent = 'Delete';
      }, 5000);
      return;
    }
    this.app.conn.send({ type: 'chat.delete', chatId: this.chatId });
  }

  transcriptJSON() {
    const chat = this.app.chats.get(this.chatId);
    return JSON.stringify({ v: 1, chatId: this.chatId, title: chat?.title || '', exportedAt: new Date().toISOString(), entries: this.entries }, null, 2);
  }

  async copy() {
    const text = this.transcriptJSON();
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // Plain HTTP over a LAN address is not a secure context: fall back.
      const ta = h('textarea', { class: 'visually-hidden' });
      ta.value = text;
      document.body.append(ta);
      ta.select();
      const ok = document.execCommand('copy');
      ta.remove();
      if (!ok) {
        this.app.toast('Copying is blocked here.');
        return;
      }
    }
    this.app.toast(`Copied the transcript (${this.entries.length} entries) as JSON.`);
  }
}
