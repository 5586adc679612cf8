// ferroclaw dashboard: plain JavaScript over the gateway's WebSocket RPC and HTTP API.
// The token lives in this tab's sessionStorage (never a cookie); every element is built
// with textContent, never from HTML strings, so nothing a model writes runs here.
'use strict';

const TOKEN_KEY = 'ferroclaw.token';
const THEME_KEY = 'ferroclaw.theme';

const S = {
  token: null,
  ws: null,
  pending: new Map(),
  nextId: 1,
  role: null,
  listeners: new Set(),
  signedIn: false,
  retry: 500,
};

// ---------- small DOM helpers ----------

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return e;
}

const $ = (sel, root = document) => root.querySelector(sel);

// Appends what is there: a missing piece (null, false) is skipped, never shown as text.
function add(parent, ...kids) {
  for (const kid of kids.flat()) {
    if (kid !== null && kid !== undefined && kid !== false) parent.append(kid);
  }
}

function put(parent, ...kids) {
  parent.replaceChildren();
  add(parent, ...kids);
}

function field(label, input) {
  const id = input.id || `f-${Math.random().toString(36).slice(2)}`;
  input.id = id;
  return el('div', {}, el('label', { for: id, text: label }), input);
}

function fmtTime(ms) {
  if (!ms) return '–';
  return new Date(ms).toLocaleString();
}

function fmtDur(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

function fmtNum(n) {
  return (n || 0).toLocaleString();
}

function fmtCost(c) {
  return `$${(c || 0).toFixed(4)}`;
}

function pill(status) {
  const cls = status === 'ok' ? 'ok' : (status === 'running' || status === 'stalled' ? 'warn' : 'bad');
  return el('span', { class: `pill ${cls}`, text: status });
}

function say(text) {
  $('#status-line').textContent = text;
}

function table(headers, rows, caption) {
  return el('div', { class: 'table-wrap' },
    el('table', {},
      caption ? el('caption', { class: 'muted', text: caption }) : null,
      el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows)));
}

// ---------- connection ----------

function wsUrl() {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`;
}

function connect(token) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl());
    let done = false;
    ws.onopen = () => {
      const id = String(S.nextId++);
      S.pending.set(id, {
        resolve: (p) => { done = true; resolve({ ws, hello: p }); },
        reject: (e) => { done = true; reject(e); ws.close(); },
      });
      ws.send(JSON.stringify({
        type: 'req', id, method: 'connect',
        params: { token, minProtocol: 3, maxProtocol: 3, client: { id: 'ferroclaw-dashboard', version: '1' } },
      }));
    };
    ws.onmessage = (m) => onFrame(m.data);
    ws.onerror = () => { if (!done) reject(new Error('cannot reach the gateway')); };
    ws.onclose = () => {
      for (const [, p] of S.pending) p.reject(new Error('connection closed'));
      S.pending.clear();
      if (!done) reject(new Error('the gateway closed the connection'));
      else if (S.signedIn && S.ws === ws) reconnect();
    };
  });
}

function onFrame(data) {
  let f;
  try { f = JSON.parse(data); } catch { return; }
  if (f.type === 'res') {
    const p = S.pending.get(String(f.id));
    if (!p) return;
    S.pending.delete(String(f.id));
    if (f.ok) p.resolve(f.payload);
    else p.reject(new Error((f.error && f.error.message) || 'request failed'));
  } else if (f.type === 'event') {
    for (const l of S.listeners) l(f.event, f.payload || {});
  }
}

function reconnect() {
  say('Connection lost; reconnecting…');
  setTimeout(async () => {
    try {
      const { ws } = await connect(S.token);
      S.ws = ws;
      S.retry = 500;
      say('Reconnected');
    } catch {
      S.retry = Math.min(S.retry * 2, 10000);
      reconnect();
    }
  }, S.retry);
}

function call(method, params) {
  return new Promise((resolve, reject) => {
    if (!S.ws || S.ws.readyState !== WebSocket.OPEN) {
      reject(new Error('not connected'));
      return;
    }
    const id = String(S.nextId++);
    S.pending.set(id, { resolve, reject });
    S.ws.send(JSON.stringify({ type: 'req', id, method, params: params || {} }));
  });
}

async function api(path) {
  const r = await fetch(path, { headers: { Authorization: `Bearer ${S.token}` } });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((body.error && body.error.message) || `HTTP ${r.status}`);
  return body;
}

function listen(fn) {
  S.listeners.add(fn);
  return () => S.listeners.delete(fn);
}

// ---------- sign in / out ----------

async function signIn(token) {
  const { ws, hello } = await connect(token);
  S.ws = ws;
  S.token = token;
  S.role = hello.role;
  S.signedIn = true;
  sessionStorage.setItem(TOKEN_KEY, token);
  $('#token').value = '';
  $('#login').hidden = true;
  $('#app').hidden = false;
  watchApprovals();
  route();
}

function signOut() {
  S.signedIn = false;
  sessionStorage.removeItem(TOKEN_KEY);
  if (S.ws) S.ws.close();
  S.ws = null;
  S.token = null;
  $('#app').hidden = true;
  $('#login').hidden = false;
  $('#token').value = '';
  $('#token').focus();
}

// ---------- pages ----------

let leave = () => {};

const PAGES = {
  chat: chatPage,
  sessions: sessionsPage,
  agents: agentsPage,
  traces: tracesPage,
  usage: usagePage,
  approvals: approvalsPage,
  system: systemPage,
};

async function route() {
  if (!S.signedIn) return;
  leave();
  leave = () => {};
  const [, name = 'chat', arg] = (location.hash || '#/chat').split('/');
  for (const a of document.querySelectorAll('.top nav a')) {
    if (a.getAttribute('href') === `#/${name}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const main = $('#main');
  main.replaceChildren();
  const page = PAGES[name] || chatPage;
  try {
    await page(main, arg ? decodeURIComponent(arg) : undefined);
  } catch (e) {
    add(main, el('p', { class: 'error', role: 'alert', text: e.message }));
  }
}

function renderBlocks(msg) {
  const out = [];
  const content = Array.isArray(msg.content) ? msg.content : [{ type: 'text', text: String(msg.content || '') }];
  for (const b of content) {
    if (b.type === 'text' && b.text) out.push(el('div', { class: 'body', text: b.text }));
    else if (b.type === 'thinking' && b.thinking) {
      out.push(el('details', {}, el('summary', { text: 'Thinking' }), el('div', { class: 'body', text: b.thinking })));
    } else if (b.type === 'toolCall') {
      out.push(el('details', {}, el('summary', { text: `Tool call: ${b.name}` }),
        el('pre', { text: JSON.stringify(b.arguments, null, 2) })));
    }
  }
  return out;
}

function renderMessage(m) {
  if (m.role === 'toolResult') {
    const text = (m.content || []).map((b) => b.text || '').join('');
    return el('details', { class: 'msg tool' },
      el('summary', { text: `Tool result: ${m.toolName}${m.isError ? ' (error)' : ''}` }),
      el('pre', { text }));
  }
  return el('div', { class: `msg ${m.role}` },
    el('div', { class: 'who', text: m.role === 'user' ? 'You' : 'Assistant' }),
    renderBlocks(m),
    m.errorMessage ? el('div', { class: 'error', text: m.errorMessage }) : null);
}

async function agentSelect(id) {
  const { agents = [], defaultId } = await call('agents.list');
  const select = el('select', { id });
  for (const a of agents) {
    const aid = a.id || a.agentId;
    select.append(el('option', { value: aid, text: a.name && a.name !== aid ? `${a.name} (${aid})` : aid }));
  }
  if (defaultId) select.value = defaultId;
  return select;
}

async function chatPage(main) {
  const agent = await agentSelect('chat-agent');
  const key = el('input', { id: 'chat-session', value: sessionStorage.getItem('ferroclaw.session') || 'dashboard' });
  const messages = el('div', { class: 'messages', id: 'messages', role: 'log', 'aria-live': 'polite', 'aria-label': 'Conversation' });
  const text = el('textarea', { id: 'chat-input', rows: 3, placeholder: 'Ask the agent…' });
  const send = el('button', { type: 'submit', id: 'chat-send', text: 'Send' });
  const stop = el('button', { type: 'button', id: 'chat-stop', class: 'ghost', text: 'Stop', disabled: true });
  const form = el('form', { class: 'composer' }, field('Message', text), send, stop);
  add(main, el('h1', { text: 'Chat' }),
    el('div', { class: 'row' }, field('Agent', agent), field('Session', key)),
    el('div', { class: 'chat' }, messages, form));

  const load = async () => {
    const { messages: list = [] } = await call('chat.history', { agentId: agent.value, sessionKey: key.value, limit: 200 });
    put(messages, ...list.map(renderMessage));
    messages.scrollTop = messages.scrollHeight;
  };
  agent.addEventListener('change', load);
  key.addEventListener('change', () => { sessionStorage.setItem('ferroclaw.session', key.value); load(); });
  // The composer works from the start: a message sent while the history is still
  // loading waits for it, instead of the browser submitting the form itself.
  const history = load();

  let live = null;
  let busy = false;
  leave = listen((event, p) => {
    if (!live) return;
    if (event === 'chat' && p.type === 'chunk') {
      live.answer.textContent += p.content || '';
    } else if (event === 'chat' && p.type === 'thinking') {
      live.thinking.hidden = false;
      live.thinkingText.textContent += p.content || '';
    } else if (event === 'agent' && p.type === 'tool.call') {
      const summary = el('summary', { text: `Tool call: ${p.name} (running…)` });
      const d = el('details', { class: 'tool-call', 'data-call': p.id }, summary,
        el('pre', { text: JSON.stringify(p.arguments, null, 2) }));
      live.tools.append(d);
      live.calls.set(p.id, summary);
    } else if (event === 'agent' && p.type === 'tool.result') {
      const s = live.calls.get(p.id);
      if (s) s.textContent = `Tool call: ${p.name} (${p.isError ? 'failed' : 'done'}, ${fmtDur(p.durationMs)})`;
    } else if (event === 'agent' && (p.type === 'run.stalled')) {
      live.note.textContent = `Stalled: nothing moved for ${fmtDur(p.idleMs)}; the gateway is stopping it.`;
    }
    messages.scrollTop = messages.scrollHeight;
  });

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const message = text.value;
    if (!message.trim() || busy) return;
    busy = true;
    text.value = '';
    send.disabled = true;
    await history.catch(() => {});
    messages.append(renderMessage({ role: 'user', content: [{ type: 'text', text: message }] }));
    const thinkingText = el('div', { class: 'body' });
    const thinking = el('details', { hidden: true }, el('summary', { text: 'Thinking' }), thinkingText);
    const tools = el('div');
    const answer = el('div', { class: 'body answer' });
    const note = el('div', { class: 'muted', role: 'status' });
    messages.append(el('div', { class: 'msg assistant live' },
      el('div', { class: 'who', text: 'Assistant' }), thinking, tools, answer, note));
    live = { answer, thinking, thinkingText, tools, note, calls: new Map() };
    send.disabled = true;
    stop.disabled = false;
    try {
      const res = await call('chat.send', { agentId: agent.value, sessionKey: key.value, message });
      if (!answer.textContent && res && res.content) answer.textContent = res.content;
      note.textContent = '';
    } catch (err) {
      note.textContent = err.message;
      note.className = 'error';
    } finally {
      live = null;
      busy = false;
      send.disabled = false;
      stop.disabled = true;
      text.focus();
    }
  });
  stop.addEventListener('click', () => call('chat.abort', { agentId: agent.value, sessionKey: key.value }).catch((e) => say(e.message)));
  await history;
}

async function sessionsPage(main) {
  add(main, el('h1', { text: 'Sessions' }));
  const integrity = el('div', { class: 'row' });
  add(main, integrity);
  const showIntegrity = async () => {
    const st = await call('integrity.status').catch(() => null);
    const scan = el('button', { type: 'button', class: 'ghost', text: 'Scan transcripts now' });
    scan.addEventListener('click', async () => {
      scan.disabled = true;
      try {
        const r = await call('integrity.scan', { repair: false });
        say(`Scanned ${r.scanned ?? r.sessions ?? 0} transcripts, ${r.issues ?? 0} issues`);
      } catch (e) { say(e.message); }
      await showIntegrity();
    });
    const last = st && (st.lastScan || st.status || st);
    put(integrity, 
      el('p', { class: 'muted', text: last && last.timestamp ? `Last integrity scan ${last.timestamp}: ${last.issues ?? 0} issues, ${last.repaired ?? 0} repaired` : 'No integrity scan recorded yet.' }),
      S.role === 'viewer' ? null : scan);
  };
  await showIntegrity();
  const detail = el('section', { 'aria-label': 'Session history' });
  const { sessions = [] } = await call('sessions.list');
  sessions.sort((a, b) => (b.updatedAt || 0) - (a.updatedAt || 0));
  const rows = sessions.map((s) => {
    const open = el('button', { type: 'button', class: 'ghost', text: 'History' });
    open.addEventListener('click', async () => {
      const { messages = [] } = await call('chat.history', { agentId: s.agentId, sessionKey: s.key, limit: 500 });
      put(detail, el('h2', { text: `${s.agentId} · ${s.key}` }), ...messages.map(renderMessage));
      detail.querySelector('h2').setAttribute('tabindex', '-1');
      detail.querySelector('h2').focus();
    });
    const act = (method, label) => {
      const b = el('button', { type: 'button', class: method === 'sessions.delete' ? 'danger' : 'ghost', text: label });
      b.addEventListener('click', async () => {
        if (!confirm(`${label} session ${s.key}?`)) return;
        try { await call(method, { agentId: s.agentId, sessionKey: s.key }); say(`${label}: ${s.key}`); route(); } catch (e) { say(e.message); }
      });
      return S.role === 'viewer' ? null : b;
    };
    const u = s.usage || {};
    return el('tr', {},
      el('td', {}, el('code', { text: s.key })), el('td', { text: s.agentId }),
      el('td', { text: fmtTime(s.updatedAt) }),
      el('td', { text: `${fmtNum(u.input)} / ${fmtNum(u.output)}` }),
      el('td', {}, open, ' ', act('sessions.reset', 'Reset'), ' ', act('sessions.delete', 'Delete')));
  });
  add(main, sessions.length ? table(['Session', 'Agent', 'Updated', 'Tokens in / out', ''], rows) : el('p', { class: 'muted', text: 'No sessions yet.' }), detail);
}

async function apiSend(method, path, body) {
  const r = await fetch(path, {
    method,
    headers: { Authorization: `Bearer ${S.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const out = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((out.error && out.error.message) || `HTTP ${r.status}`);
  return out;
}

async function agentsPage(main) {
  add(main, el('h1', { text: 'Agents' }));
  const { agents = [], defaultId } = await call('agents.list');
  const detail = el('section', { 'aria-label': 'Agent details', id: 'agent-detail' });
  const edit = (a) => {
    const name = el('input', { value: a.name || '' });
    const model = el('input', { value: (a.settings && a.settings.model) || '', placeholder: 'as the default agent' });
    const user = el('input', { placeholder: 'user id' });
    const role = el('select', {}, el('option', { value: 'user', text: 'user' }), el('option', { value: 'editor', text: 'editor' }));
    const save = el('form', { class: 'row' }, field('Name', name), field('Model', model),
      el('button', { type: 'submit', text: 'Save' }));
    save.addEventListener('submit', async (e) => {
      e.preventDefault();
      const settings = Object.assign({}, a.settings || {}, { name: name.value });
      if (model.value.trim()) settings.model = model.value.trim(); else delete settings.model;
      try { await call('agents.update', { agentId: a.id, settings }); say(`Saved ${a.id}`); route(); } catch (err) { say(err.message); }
    });
    const share = el('form', { class: 'row' }, field('Share with', user), field('As', role),
      el('button', { type: 'submit', text: 'Share' }));
    share.addEventListener('submit', async (e) => {
      e.preventDefault();
      try {
        await apiSend('POST', `/v1/agents/${encodeURIComponent(a.id)}/sharing`, { user: user.value.trim(), role: role.value });
        say(`Shared ${a.id} with ${user.value.trim()}`);
      } catch (err) { say(err.message); }
    });
    return [el('h2', { text: `Edit ${a.id}` }), save, share];
  };
  const rows = agents.map((a) => {
    const id = a.id || a.agentId;
    const b = el('button', { type: 'button', class: 'ghost', text: 'Configuration' });
    b.addEventListener('click', async () => {
      const info = await call('agent', { agentId: id });
      put(detail, el('h2', { text: id }), el('pre', { text: JSON.stringify(info, null, 2) }),
        a.source === 'database' && a.settings ? edit(a) : null);
    });
    return el('tr', {}, el('td', {}, el('code', { text: id }), id === defaultId ? ' (default)' : ''),
      el('td', { text: a.name || '' }), el('td', { text: `${a.provider || ''}/${a.model || ''}` }),
      el('td', { text: a.source === 'database' ? `${a.owner ? `${a.owner}'s` : 'stored'} (${a.access || ''})` : 'config file' }),
      el('td', {}, b));
  });
  add(main, table(['Agent', 'Name', 'Model', 'Kept in', ''], rows), detail);
  if (S.role === 'viewer') return;
  // Users' agents live in the storage: anyone may make one for themselves.
  const id = el('input', { id: 'new-agent-id', required: true, pattern: '[a-z0-9][a-z0-9_-]{0,63}' });
  const name = el('input', { id: 'new-agent-name' });
  const kind = el('select', { id: 'new-agent-kind' }, el('option', { value: 'open', text: 'open (each user shapes it)' }),
    el('option', { value: 'predefined', text: 'predefined (its files are yours)' }));
  const form = el('form', { class: 'row', id: 'new-agent' }, field('New agent id', id), field('Name', name), field('Kind', kind),
    el('button', { type: 'submit', text: 'Create agent' }));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      await call('agents.create', { id: id.value.trim(), kind: kind.value, settings: { name: name.value.trim() || id.value.trim() } });
      say(`Created ${id.value.trim()}`);
      route();
    } catch (err) { say(err.message); }
  });
  add(main, el('h2', { text: 'New agent' }), form);
}

function stuck(t) {
  return t.status === 'stalled' || (t.status === 'running' && Date.now() - t.startedAt > 120000);
}

async function tracesPage(main, id) {
  if (id) return traceDetail(main, id);
  add(main, el('h1', { text: 'Runs and traces' }));
  const status = el('select', { id: 'trace-status' },
    ['', 'running', 'ok', 'stalled', 'aborted', 'timeout', 'provider_error', 'lost'].map((s) => el('option', { value: s, text: s || 'any' })));
  const agent = el('input', { id: 'trace-agent', placeholder: 'any' });
  const list = el('div');
  add(main, el('div', { class: 'row' }, field('Status', status), field('Agent', agent)), list);
  let cursor = null;
  const load = async (more) => {
    const q = new URLSearchParams({ limit: '50' });
    if (status.value) q.set('status', status.value);
    if (agent.value.trim()) q.set('agent', agent.value.trim());
    if (more && cursor) q.set('cursor', cursor);
    const page = await api(`/v1/traces?${q}`);
    cursor = page.nextCursor;
    const rows = page.data.map((t) => el('tr', { class: stuck(t) ? 'stuck' : null },
      el('td', {}, el('a', { href: `#/traces/${encodeURIComponent(t.id)}`, text: fmtTime(t.startedAt) })),
      el('td', { text: t.agentId }), el('td', {}, pill(t.status), stuck(t) ? el('span', { class: 'muted', text: ' stuck' }) : null),
      el('td', { text: t.origin }),
      el('td', { text: `${fmtNum(t.inputTokens)} / ${fmtNum(t.outputTokens)}` }),
      el('td', { text: fmtCost(t.costUsd) }),
      el('td', { text: t.endedAt ? fmtDur(t.endedAt - t.startedAt) : 'running' })));
    const more_btn = cursor ? el('button', { type: 'button', class: 'ghost', text: 'Older runs', onclick: () => load(true) }) : null;
    const t = table(['Started', 'Agent', 'Status', 'From', 'Tokens in / out', 'Cost', 'Duration'], rows);
    if (more) list.append(t, more_btn || '');
    else put(list, page.data.length ? t : el('p', { class: 'muted', text: 'No runs recorded yet.' }), more_btn || '');
  };
  status.addEventListener('change', () => load(false));
  agent.addEventListener('change', () => load(false));
  await load(false);
}

async function traceDetail(main, id) {
  const { trace: t, spans = [], children = [] } = await api(`/v1/traces/${encodeURIComponent(id)}`);
  add(main, el('p', {}, el('a', { href: '#/traces', text: '← All runs' })),
    el('h1', { text: `Run ${t.id}` }),
    el('div', { class: 'grid' },
      el('div', { class: 'stat' }, 'Status', el('b', {}, pill(t.status))),
      el('div', { class: 'stat' }, 'Agent', el('b', { text: t.agentId })),
      el('div', { class: 'stat' }, 'Tokens in / out / cached', el('b', { text: `${fmtNum(t.inputTokens)} / ${fmtNum(t.outputTokens)} / ${fmtNum(t.cachedTokens)}` })),
      el('div', { class: 'stat' }, 'Cost', el('b', { text: fmtCost(t.costUsd) })),
      el('div', { class: 'stat' }, 'Duration', el('b', { text: t.endedAt ? fmtDur(t.endedAt - t.startedAt) : 'running' }))),
    t.error ? el('p', { class: 'error', role: 'alert', text: t.error }) : null,
    el('h2', { text: 'Waterfall' }));
  const t0 = t.startedAt;
  const total = Math.max(1, (t.endedAt || Date.now()) - t0);
  const fall = el('div', { class: 'waterfall', id: 'waterfall' });
  for (const s of spans) {
    const left = ((s.startedAt - t0) / total) * 100;
    const width = (((s.endedAt || Date.now()) - s.startedAt) / total) * 100;
    const label = s.kind === 'llm' ? `model ${s.model || ''} · ${fmtNum(s.inputTokens)}→${fmtNum(s.outputTokens)}` : s.kind === 'tool' ? `tool ${s.name}` : `agent ${s.name}`;
    const bar = el('div', {
      class: `bar ${s.kind}${s.status === 'error' || s.status === 'interrupted' ? ' error' : ''}`,
      role: 'img', 'aria-label': `${label}: ${fmtDur((s.endedAt || Date.now()) - s.startedAt)}, ${s.status}`,
    });
    // Through the CSSOM: the page's policy forbids style attributes.
    bar.style.left = `${Math.max(0, Math.min(left, 100))}%`;
    bar.style.width = `${Math.max(0.3, Math.min(width, 100 - Math.max(0, left)))}%`;
    fall.append(el('div', { class: 'span-row' },
      el('div', {}, el('div', { text: label }), s.error ? el('div', { class: 'error', text: s.error }) : null),
      el('div', { class: 'track' }, bar)));
  }
  add(main, fall, el('h2', { text: 'Input and output' }),
    el('pre', { text: t.input }), el('pre', { text: t.output || '(none)' }));
  if (children.length) {
    add(main, el('h2', { text: 'Runs it started' }),
      el('ul', {}, children.map((c) => el('li', {}, el('a', { href: `#/traces/${encodeURIComponent(c)}`, text: c })))));
  }
  add(main, el('details', {}, el('summary', { text: 'Spans as JSON' }), el('pre', { text: JSON.stringify(spans, null, 2) })));
}

function barChart(rows) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('class', 'chart');
  svg.setAttribute('viewBox', '0 0 600 220');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', `Tokens per day: ${rows.map((r) => `${r.key} ${r.inputTokens + r.outputTokens}`).join(', ') || 'none'}`);
  const max = Math.max(1, ...rows.map((r) => r.inputTokens + r.outputTokens));
  // At least a week of slots, so one day is a bar, not a wall.
  const w = 560 / Math.max(7, rows.length);
  rows.forEach((r, i) => {
    const hgt = ((r.inputTokens + r.outputTokens) / max) * 170;
    const rect = document.createElementNS(ns, 'rect');
    rect.setAttribute('x', String(30 + i * w + w * 0.1));
    rect.setAttribute('y', String(190 - hgt));
    rect.setAttribute('width', String(w * 0.8));
    rect.setAttribute('height', String(hgt));
    const label = document.createElementNS(ns, 'text');
    label.setAttribute('x', String(30 + i * w + w * 0.1));
    label.setAttribute('y', '208');
    label.textContent = r.key.slice(5);
    svg.append(rect, label);
  });
  return svg;
}

async function usagePage(main) {
  add(main, el('h1', { text: 'Usage' }));
  const since = Date.now() - 30 * 86400000;
  const u = await call('usage.summary', { since });
  const tot = u.total || {};
  const rows = (list, label) => table([label, 'Calls', 'Tokens in', 'Tokens out', 'Cached', 'Cost'],
    (list || []).map((r) => el('tr', {}, el('td', { text: r.key || '(none)' }), el('td', { text: fmtNum(r.calls) }),
      el('td', { text: fmtNum(r.inputTokens) }), el('td', { text: fmtNum(r.outputTokens) }),
      el('td', { text: fmtNum(r.cachedTokens) }), el('td', { text: fmtCost(r.costUsd) }))));
  const days = [...(u.byDay || [])].sort((a, b) => a.key.localeCompare(b.key));
  add(main, 
    el('p', { class: 'muted', text: 'The last 30 days.' }),
    el('div', { class: 'grid' },
      el('div', { class: 'stat' }, 'Model calls', el('b', { text: fmtNum(tot.calls) })),
      el('div', { class: 'stat' }, 'Tokens in', el('b', { text: fmtNum(tot.inputTokens) })),
      el('div', { class: 'stat' }, 'Tokens out', el('b', { text: fmtNum(tot.outputTokens) })),
      el('div', { class: 'stat' }, 'Cost', el('b', { text: fmtCost(tot.costUsd) }))),
    el('h2', { text: 'Tokens per day' }), barChart(days),
    el('h2', { text: 'By agent' }), rows(u.byAgent, 'Agent'),
    el('h2', { text: 'By model' }), rows(u.byModel, 'Model'),
    el('h2', { text: 'By user' }), rows(u.byUser, 'User'));
}

let approvalsSeen = 0;

function watchApprovals() {
  const refresh = async () => {
    const { approvals = [] } = await call('exec.approval.list').catch(() => ({ approvals: [] }));
    approvalsSeen = approvals.length;
    const badge = $('#approval-count');
    badge.hidden = approvals.length === 0;
    badge.textContent = String(approvals.length);
  };
  listen((event) => { if (event.startsWith('exec.approval.')) refresh(); });
  refresh();
}

async function approvalsPage(main) {
  add(main, el('h1', { text: 'Exec approvals' }),
    el('p', { class: 'muted', text: 'Commands an agent wants to run and that wait for a person. This page updates as requests come and go.' }));
  const list = el('div', { id: 'approvals', 'aria-live': 'polite' });
  add(main, list);
  const load = async () => {
    const { approvals = [] } = await call('exec.approval.list');
    if (!approvals.length) {
      put(list, el('p', { class: 'muted', text: 'Nothing is waiting.' }));
      return;
    }
    put(list, table(['Command', 'Agent · session', 'Expires', ''], approvals.map((a) => {
      const answer = (approve) => async () => {
        try {
          await call(approve ? 'exec.approval.approve' : 'exec.approval.deny', { id: a.id });
          say(`${approve ? 'Approved' : 'Denied'}: ${a.command}`);
        } catch (e) { say(e.message); }
        load();
      };
      return el('tr', {},
        el('td', {}, el('code', { text: a.command })),
        el('td', { text: `${a.agentId || a.agent_id || ''} · ${a.sessionKey || a.session_key || ''}` }),
        el('td', { text: fmtTime(a.expiresAtMs || a.expires_at_ms) }),
        el('td', {},
          el('button', { type: 'button', onclick: answer(true), text: 'Approve', 'aria-label': `Approve ${a.command}` }), ' ',
          el('button', { type: 'button', class: 'danger', onclick: answer(false), text: 'Deny', 'aria-label': `Deny ${a.command}` })));
    })));
  };
  leave = listen((event) => { if (event.startsWith('exec.approval.')) load(); });
  await load();
}

async function systemPage(main) {
  add(main, el('h1', { text: 'System' }));
  const st = await call('status');
  add(main, el('div', { class: 'grid' },
    el('div', { class: 'stat' }, 'Version', el('b', { text: `${st.version} · protocol ${st.protocol}` })),
    el('div', { class: 'stat' }, 'Up for', el('b', { text: fmtDur(st.uptimeMs) })),
    el('div', { class: 'stat' }, 'Runs now / queued', el('b', { text: `${st.activeRuns} / ${st.queued}` })),
    el('div', { class: 'stat' }, 'Connections', el('b', { text: String(st.connections) })),
    el('div', { class: 'stat' }, 'Traces written / dropped', el('b', { text: st.traces ? `${fmtNum(st.traces.written)} / ${fmtNum(st.traces.dropped)}` : 'off' }))));
  const stalls = st.stalledRuns || [];
  add(main, el('h2', { text: 'Stalled runs' }), stalls.length
    ? table(['When', 'Agent · session', 'Idle', 'Waiting on', ''], stalls.map((s) => el('tr', { class: 'stuck' },
      el('td', { text: fmtTime(s.atMs) }), el('td', { text: `${s.agentId} · ${s.sessionKey}` }),
      el('td', { text: fmtDur(s.idleMs) }), el('td', { text: s.waitingOn }),
      el('td', {}, el('a', { href: `#/traces/${encodeURIComponent(s.runId)}`, text: s.recovered ? 'recovered · trace' : 'trace' })))))
    : el('p', { class: 'muted', text: 'None.' }));
  const section = async (title, method, render) => {
    add(main, el('h2', { text: title }));
    try {
      add(main, render(await call(method)));
    } catch (e) {
      add(main, el('p', { class: 'muted', text: e.message }));
    }
  };
  await section('Providers', 'providers.status', (r) => {
    const rows = (r.providers || []).map((p) => el('tr', {},
      el('td', { text: p.name }), el('td', {}, el('code', { text: p.baseUrl })),
      el('td', {}, el('span', { class: `pill ${p.reachable && !p.error ? 'ok' : 'bad'}`, text: p.reachable && !p.error ? 'reachable' : 'unreachable' })),
      el('td', { text: p.error || `${p.models.length} models, ${fmtDur(p.latencyMs)}` })));
    const wrap = el('div', {}, rows.length ? table(['Provider', 'Address', 'State', 'Details'], rows)
      : el('p', { class: 'muted', text: 'No provider is configured yet.' }));
    for (const l of r.local || []) {
      add(wrap, el('p', { class: 'offer', role: 'note' },
        `A local model server answers: ${l.name} at `, el('code', { text: l.baseUrl }),
        ` with ${l.models.length} model(s) (${l.models.slice(0, 3).join(', ')}). Run `,
        el('code', { text: 'ferroclaw onboard' }), ' to use it (gpt-oss, Qwen3 and DeepSeek-R1 models get tool_mode auto).'));
    }
    return wrap;
  });
  await section('Models', 'models.list', (r) => table(['Model', 'Provider'],
    (r.models || []).map((m) => el('tr', {}, el('td', {}, el('code', { text: m.model })), el('td', { text: m.provider })))));
  await section('MCP servers', 'mcp.status', (r) => (r.servers || []).length
    ? table(['Server', 'State', 'Tools', 'Last error'], r.servers.map((s) => el('tr', {}, el('td', { text: s.name }),
      el('td', { text: s.state || s.status || '' }), el('td', { text: String((s.tools || []).length ?? s.tools) }), el('td', { text: s.lastError || s.error || '' }))))
    : el('p', { class: 'muted', text: 'None configured.' }));
  await section('Channels', 'channels.list', (r) => {
    const list = Array.isArray(r) ? r : (r.channels || []);
    return list.length ? el('pre', { text: JSON.stringify(list, null, 2) }) : el('p', { class: 'muted', text: 'None configured.' });
  });
  if (S.role === 'admin') {
    await section('Configuration (secrets masked)', 'config.get', (r) =>
      el('details', {}, el('summary', { text: 'The configuration as loaded' }),
        el('pre', { id: 'config-view', text: JSON.stringify(r.config, null, 2) })));
  }
  await section('Scheduled jobs', 'cron.list', (r) => (r.jobs || []).length
    ? table(['Job', 'Agent', 'Next run', 'Enabled'], r.jobs.map((j) => el('tr', {}, el('td', { text: j.name || j.id }),
      el('td', { text: j.agentId || '' }), el('td', { text: fmtTime(j.nextRunAt) }), el('td', { text: j.enabled ? 'yes' : 'no' }))))
    : el('p', { class: 'muted', text: 'None.' }));
}

// ---------- start ----------

function applyTheme(theme) {
  document.documentElement.dataset.theme = theme;
  localStorage.setItem(THEME_KEY, theme);
}

document.addEventListener('DOMContentLoaded', () => {
  const preferred = localStorage.getItem(THEME_KEY)
    || (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
  applyTheme(preferred);
  $('#theme').addEventListener('click', () => applyTheme(document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark'));
  $('#logout').addEventListener('click', signOut);
  window.addEventListener('hashchange', route);
  $('#login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    $('#login-error').textContent = '';
    try {
      await signIn($('#token').value.trim());
    } catch (err) {
      $('#login-error').textContent = err.message;
    }
  });
  // A URL printed by the gateway carries the token in the fragment (never sent to the
  // server); it is taken and removed from the address bar at once.
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  let token = sessionStorage.getItem(TOKEN_KEY);
  if (m) {
    token = decodeURIComponent(m[1]);
    history.replaceState(null, '', `${location.pathname}#/chat`);
  }
  if (token) {
    signIn(token).catch((err) => {
      sessionStorage.removeItem(TOKEN_KEY);
      $('#login').hidden = false;
      $('#login-error').textContent = err.message;
    });
  } else {
    $('#login').hidden = false;
    $('#token').focus();
  }
});
