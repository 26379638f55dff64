// The Goal page's live updates: one EventSource on /goals/<id>/events, each message patching
// the page in place. Everything in a message was written by a user or a model: it only ever
// becomes text nodes (never innerHTML), and links are built from the app's own paths.
// The markup mirrors the server's views (views/cycle.ts, views/goal-state.ts): keep in step.

const root = document.getElementById('goal');
const csrf = document.querySelector('meta[name="csrf-token"]')?.getAttribute('content') ?? '';
const ACTIVITY_MAX = 200;

/** An element with attributes and children; strings become text nodes. */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === '') continue;
    node.append(typeof child === 'string' || typeof child === 'number' ? shown(String(child)) : child);
  }
  return node;
}

/** Bidi overrides and isolates as visible escapes (as the server's pages show them): drawn, they reorder text. */
const shown = (text) =>
  text.replace(/[\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

const enc = encodeURIComponent;
const goalId = root?.dataset.goalId ?? '';
const artifactHref = (name) => `/goals/${enc(goalId)}/artifact?name=${enc(name)}`;
const transcriptHref = (threadId) => `/transcripts/${enc(threadId)}`;

const count = (n) => n.toLocaleString('en-US');

function duration(ms) {
  if (ms === undefined || ms === null) return '';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(2)} s`;
}

function toolCalls(s) {
  if (!s.toolCalls) return '';
  return s.toolErrors ? `${s.toolCalls} (${s.toolErrors} failed)` : String(s.toolCalls);
}

function subtaskRow(s) {
  return el(
    'tr',
    { class: 'subtask', 'data-index': s.index, 'data-state': s.state },
    el('td', { class: 'index' }, String(s.index)),
    el('td', { class: 'role' }, s.role),
    el('td', { class: 'instruction' }, s.instruction ?? ''),
    el('td', { class: 'artifact' }, el('a', { href: artifactHref(s.artifact) }, s.artifact)),
    el('td', { class: 'read-files' }, (s.readFiles ?? []).join(', ')),
    el('td', { class: 'state' }, el('span', { class: `badge state-${s.state}` }, s.state)),
    el('td', { class: 'tokens' }, s.tokens === undefined ? '' : count(s.tokens)),
    el('td', { class: 'token-cap' }, s.tokenCap === undefined ? '' : count(s.tokenCap)),
    el('td', { class: 'attempt' }, `${s.attempt ?? ''}${s.restarted ? ' (restarted)' : ''}`),
    el('td', { class: 'duration' }, duration(s.ms)),
    el('td', { class: 'tools' }, toolCalls(s)),
    el('td', { class: 'reason' }, s.reason ?? ''),
    el('td', { class: 'thread' }, s.threadId ? el('a', { href: transcriptHref(s.threadId) }, 'transcript') : ''),
  );
}

function reflection(r) {
  return el(
    'div',
    { class: 'reflection', 'data-decision': r.decision },
    'Reflection: ',
    el('strong', { class: 'decision' }, r.decision),
    ' ',
    el('span', { class: 'reason' }, r.reason),
    r.threadId ? [' ', el('a', { class: 'thread', href: transcriptHref(r.threadId) }, 'transcript')] : '',
  );
}

function paused(p) {
  const attrs = { class: 'paused', 'data-paused-for': p.pausedFor, 'data-budget': p.budget ?? '' };
  return el('div', attrs, el('span', { class: 'title' }, p.title), ': ', el('span', { class: 'reason' }, p.reason));
}

function resumed(r) {
  const files = r.files ? [' ', el('span', { class: 'files' }, `(files: ${r.files})`)] : '';
  const raised = r.raised ? [' ', el('span', { class: 'raised' }, `(${r.raised})`)] : '';
  const note = r.note ? [' ', el('q', { class: 'note' }, r.note)] : '';
  const action = el('span', { class: 'action' }, r.action);
  return el('div', { class: 'resumed' }, 'Resumed: ', action, files, raised, note);
}

function outcome(c) {
  const parts = [];
  if (c.reflection) parts.push(reflection(c.reflection));
  if (c.stalled) {
    const s = c.stalled;
    const title = el('strong', { class: 'title' }, s.title);
    parts.push(
      el('div', { class: 'stalled', 'data-action': s.action }, title, ': ', el('span', { class: 'reason' }, s.reason)),
    );
  }
  if (c.paused) parts.push(paused(c.paused));
  if (c.resumed) parts.push(resumed(c.resumed));
  if (c.evicted?.length) parts.push(el('div', { class: 'evicted' }, `Evicted: ${c.evicted.join(', ')}`));
  return parts;
}

function cycleBlock(c) {
  const planner = c.plannerThreadId
    ? [' · ', el('a', { class: 'planner-thread', href: transcriptHref(c.plannerThreadId) }, 'planner transcript')]
    : '';
  const heads = ['#', 'role', 'instruction', 'expected artifact', 'read_files', 'state', 'tokens', 'token cap'];
  const head = el(
    'tr',
    {},
    [...heads, 'attempt', 'duration', 'tool calls', 'failure reason', ''].map((h) => el('th', {}, h)),
  );
  return el(
    'section',
    { class: 'cycle', id: `cycle-${c.step}`, 'data-step': c.step },
    el('h3', {}, `Cycle ${c.step}`),
    el(
      'p',
      { class: 'plan-meta' },
      'plan from: ',
      el('span', { class: 'plan-source' }, c.planSource ?? 'the timeline (its instructions are no longer kept)'),
      planner,
    ),
    el('table', { class: 'subtasks' }, el('thead', {}, head), el('tbody', {}, c.subtasks.map(subtaskRow))),
    outcome(c),
  );
}

/** Each cycle's plan as last sent (instruction and read files by subtask index). */
const plans = new Map();

/** The cycle with its plan: a cycle sent without it (`planSent`, nothing changed there) gets the one kept. */
function withPlan(c) {
  if (!c.planSent) {
    plans.set(
      c.step,
      new Map(c.subtasks.map((s) => [s.index, { instruction: s.instruction, readFiles: s.readFiles }])),
    );
    return c;
  }
  const plan = plans.get(c.step) ?? new Map();
  return { ...c, subtasks: c.subtasks.map((s) => ({ ...plan.get(s.index), ...s })) };
}

/** Replaces the cycle's block, or adds it in step order. */
function upsertCycle(c) {
  const box = document.getElementById('cycles');
  const block = cycleBlock(c);
  const old = document.getElementById(`cycle-${c.step}`);
  if (old) {
    old.replaceWith(block);
    return;
  }
  const later = [...box.querySelectorAll('section.cycle')].find((s) => Number(s.dataset.step) > c.step);
  box.insertBefore(block, later ?? null);
}

function budgetRow(b) {
  const pct = b.share === null ? '' : `${Math.round(b.share * 100)}%`;
  const meter = b.share === null ? '' : [el('meter', { min: 0, max: 1, value: b.share }), ` ${pct}`];
  const mark = b.paused ? [' ', el('span', { class: 'paused-mark' }, 'paused here')] : '';
  return el(
    'tr',
    { class: 'budget', 'data-budget': b.name, 'data-paused': String(b.paused) },
    el('td', { class: 'name' }, b.name, mark),
    el('td', { class: 'used' }, b.used),
    el('td', { class: 'limit' }, b.limit),
    el('td', { class: 'share' }, meter),
  );
}

function artifactRow(a) {
  return el(
    'tr',
    { class: 'artifact-row', 'data-name': a.name },
    el('td', { class: 'name' }, a.href ? el('a', { href: artifactHref(a.name) }, a.name) : a.name),
    el('td', { class: 'status' }, a.status),
    el('td', { class: 'version' }, `v${a.version}`),
    el('td', { class: 'role' }, a.role),
    el('td', { class: 'step' }, String(a.step)),
    el('td', { class: 'bytes' }, a.bytes),
    el('td', { class: 'stored' }, a.stored),
  );
}

function usageRow(u) {
  const estimated = u.estimated ? [' ', el('span', { class: 'estimated' }, '(estimated)')] : '';
  return el(
    'tr',
    { class: 'usage-row', 'data-estimated': String(u.estimated) },
    el('td', { class: 'role' }, u.role),
    el('td', { class: 'model' }, u.model, estimated),
    el('td', { class: 'input' }, u.input),
    el('td', { class: 'output' }, u.output),
    el('td', { class: 'cache-read' }, u.cacheRead),
    el('td', { class: 'cache-write' }, u.cacheWrite),
  );
}

function field(f) {
  const input =
    f.kind === 'text'
      ? el('textarea', { name: f.name, rows: 2, maxlength: f.maxChars ?? 2000 })
      : f.kind === 'files'
        ? el('input', { type: 'file', name: f.name, multiple: '' })
        : el('input', { type: 'number', name: f.name, min: 0, step: f.step ?? 'any' });
  return el('label', {}, f.label, input);
}

/** A form with a files field is sent as multipart, as the page's own markup says. */
function formEncoding(a) {
  const files = (a.fields ?? []).some((f) => f.kind === 'files');
  return files ? 'multipart/form-data' : 'application/x-www-form-urlencoded';
}

/** A decision's button: a form POSTing to an app path, with this page's CSRF token. */
function actionForm(a) {
  const path = a.path.startsWith('/') && !a.path.startsWith('//') ? a.path : '#';
  return el(
    'form',
    { method: 'post', action: path, class: 'action', enctype: formEncoding(a) },
    el('input', { type: 'hidden', name: '_csrf', value: csrf }),
    (a.fields ?? []).map(field),
    el('button', { class: a.tone }, a.label),
  );
}

function decisionCard(d) {
  return el(
    'div',
    { class: 'decision-card', id: `decision-${d.id}`, 'data-kind': d.kind },
    el('h3', { class: 'title' }, d.title),
    d.detail ? el('p', { class: 'detail' }, d.detail) : '',
    d.content === undefined ? '' : el('pre', { class: 'content' }, d.content),
    el('div', { class: 'actions' }, d.actions.map(actionForm)),
  );
}

// A file field's value cannot be set from a script (it keeps its own picked files when patched).
const FIELDS = 'textarea, input:not([type=hidden]):not([type=file])';
const fieldKey = (f) => `${f.form?.getAttribute('action')} ${f.name}`;

/** What is typed in a box's fields, by form action and field name. */
function typedValues(box) {
  const typed = new Map();
  for (const f of box.querySelectorAll(FIELDS)) if (f.value) typed.set(fieldKey(f), f.value);
  return typed;
}

/** The box's field that has the focus, with its caret (null where the field has none, as a number's). */
function focusedField(box) {
  const f = document.activeElement;
  if (!f || !box.contains(f) || !f.matches(FIELDS)) return null;
  return { key: fieldKey(f), start: f.selectionStart, end: f.selectionEnd };
}

/** Whitespace between tags, as in the server's markup: where the page's own markup has no text, not content. */
const blank = (n) => n.nodeType === Node.TEXT_NODE && !n.data.trim();

/** Whether `next` can take `old`'s place by patching it: same tag, same id, an input of the same type. */
function sameKind(old, next) {
  if (old.nodeType !== next.nodeType || old.nodeName !== next.nodeName) return false;
  if (old.nodeType !== Node.ELEMENT_NODE) return true;
  return old.id === next.id && old.getAttribute('type') === next.getAttribute('type');
}

/** The node of `box` to patch into `next`: the one with its id (moved here), else the one here if alike. */
function counterpart(box, next, here) {
  if (next.nodeType !== Node.ELEMENT_NODE || !next.id) return here && sameKind(here, next) ? here : null;
  const match = [...box.children].find((c) => c.id === next.id);
  if (!match || !sameKind(match, next)) return null;
  if (match !== here) box.insertBefore(match, here ?? null);
  return match;
}

function syncAttributes(old, next) {
  for (const { name } of [...old.attributes]) if (!next.hasAttribute(name)) old.removeAttribute(name);
  for (const { name, value } of [...next.attributes])
    if (old.getAttribute(name) !== value) old.setAttribute(name, value);
}

function patch(old, next) {
  if (old.nodeType === Node.TEXT_NODE) {
    if (old.data !== next.data) old.data = next.data;
  } else if (old.nodeType === Node.ELEMENT_NODE) {
    syncAttributes(old, next);
    morphChildren(old, next);
  }
}

/**
 * Makes `box`'s children show what `next`'s show, patching the nodes in place where they are of
 * the same kind. A button, a field or a picked file survives a live update that only changes a
 * count in a title: a click landing as the card is redrawn still submits its form.
 */
function morphChildren(box, next) {
  const incoming = [...next.childNodes];
  incoming.forEach((n, i) => {
    let here = box.childNodes[i];
    while (here && blank(here) && n.nodeType !== Node.TEXT_NODE) {
      here.remove();
      here = box.childNodes[i];
    }
    const old = counterpart(box, n, here);
    if (old) patch(old, n);
    else box.insertBefore(n, here ?? null);
  });
  while (box.childNodes.length > incoming.length) box.lastChild.remove();
}

/**
 * Re-renders a list, unless it shows exactly the same thing, patching what is there (above).
 * Where a form is drawn anew all the same (another decision took its place), what was typed in
 * it is put back, and the field being typed in keeps the focus and caret: a live update must not
 * swallow the next keystrokes.
 */
function replaceRows(id, nodes) {
  const box = document.getElementById(id);
  if (!box) return;
  const same = box.children.length === nodes.length && nodes.every((n, i) => n.isEqualNode(box.children[i]));
  if (same) return;
  const typed = typedValues(box);
  const focused = focusedField(box);
  const next = document.createElement(box.nodeName);
  next.append(...nodes);
  morphChildren(box, next);
  for (const f of box.querySelectorAll(FIELDS)) {
    const key = fieldKey(f);
    if (typed.has(key) && f.value !== typed.get(key)) f.value = typed.get(key);
    if (key !== focused?.key || f === document.activeElement) continue;
    f.focus();
    if (focused.start !== null) f.setSelectionRange(focused.start, focused.end);
  }
}

function text(id, value) {
  const node = document.getElementById(id);
  const content = shown(String(value ?? ''));
  if (node && node.textContent !== content) node.textContent = content;
}

function renderGoal(g) {
  const status = document.getElementById('goal-status');
  if (status) {
    status.textContent = g.status;
    status.className = `badge status-${g.status}`;
  }
  text('goal-step', String(g.step));
  text('goal-tokens', g.tokens);
  text('goal-cost', g.cost);
  text('goal-reason', g.reason);
  replaceRows('budget-rows', g.budgets.map(budgetRow));
  replaceRows('artifact-rows', g.artifacts.map(artifactRow));
  replaceRows('usage-rows', g.usage.map(usageRow));
  replaceRows('decisions', g.decisions.map(decisionCard));
  replaceRows(
    'thread-list',
    g.threads.map((t) => el('li', {}, el('a', { href: transcriptHref(t) }, t))),
  );
  root.dataset.terminal = String(g.terminal);
}

function appendActivity(line) {
  const log = document.getElementById('activity-log');
  if (!log) return;
  log.append(el('li', {}, line));
  while (log.children.length > ACTIVITY_MAX) log.firstElementChild.remove();
}

/**
 * The stream's state, as text and as `data-state` (what tests wait on): `live` once the server
 * follows the goal in Redis and has sent its state, not merely once the request is open.
 */
function live(state, label) {
  const node = document.getElementById('live-state');
  if (node) node.dataset.state = state;
  text('live-state', label);
}

/** The page's open stream, if any: closed while the page is hidden. */
let source = null;

/**
 * The server re-reads the goal every 2 s and beats when Redis answered. Nothing heard for this
 * long on a live stream (Redis frozen, or too busy to answer): the page says it is not updating.
 */
const STALE_MS = 7000;
let heardAt = Date.now();

function heard() {
  heardAt = Date.now();
  if (document.getElementById('live-state')?.dataset.state === 'stale') live('live', 'live');
}

setInterval(() => {
  const state = document.getElementById('live-state')?.dataset.state;
  if (state === 'live' && Date.now() - heardAt > STALE_MS) live('stale', 'not updating: Redis does not answer…');
}, 1000);

/** How long a finished goal's stream stays open after its last entry. */
const FINISH_QUIET_MS = 3000;
let finishing = null;

function closeWhenQuiet(stream) {
  clearTimeout(finishing);
  finishing = setTimeout(() => stream.close(), FINISH_QUIET_MS);
}

function follow() {
  const url = new URL(root.dataset.eventsUrl, location.href);
  // The first connection starts after what the page shows; a reconnect sends Last-Event-ID.
  url.searchParams.set('after', root.dataset.lastEventId ?? '');
  const stream = new EventSource(url);
  source = stream;
  live('connecting', 'connecting…');
  stream.addEventListener('open', () => live('connected', 'connected'));
  // The inspector is up, Redis is not (yet): the stream follows once it is back.
  stream.addEventListener('waiting', () => live('waiting', 'waiting for Redis…'));
  stream.addEventListener('error', () =>
    stream.readyState === EventSource.CLOSED
      ? live('disconnected', 'disconnected')
      : live('reconnecting', 'reconnecting…'),
  );
  stream.addEventListener('beat', heard);
  stream.addEventListener('timeline', (m) => {
    heard();
    if (finishing) closeWhenQuiet(stream);
    const data = JSON.parse(m.data);
    if (data.cycle) upsertCycle(withPlan(data.cycle));
    if (data.line) appendActivity(data.line);
    root.dataset.lastEventId = m.lastEventId;
  });
  // Swept after its retention, or expired: nothing to follow, and no action can reach it.
  stream.addEventListener('gone', () => {
    stream.close();
    root.dataset.terminal = 'true';
    for (const button of document.querySelectorAll('main form button')) button.disabled = true;
    live('gone', 'this goal no longer exists (swept or expired): reload for the list');
  });
  stream.addEventListener('goal', (m) => {
    heard();
    const g = JSON.parse(m.data);
    renderGoal(g);
    // A finished goal has little more to say (a cancel's released calls come just after it):
    // the stream stops once it is quiet, rather than reconnect forever.
    if (g.terminal) {
      live('finished', 'finished');
      closeWhenQuiet(stream);
    } else live('live', 'live');
  });
}

/**
 * A browser keeps at most 6 connections to one host over HTTP/1.1, and each open stream holds one:
 * a seventh goal page, or any click, would wait behind them. A hidden page closes its stream and
 * opens it again when shown, from the last event it has (missing nothing, repeating nothing).
 */
function followWhileVisible() {
  if (root.dataset.terminal === 'true' || document.visibilityState === 'hidden') return;
  if (!source) follow();
}

function onVisibilityChange() {
  if (document.visibilityState !== 'hidden') return followWhileVisible();
  if (!source) return;
  source.close();
  source = null;
  if (root.dataset.terminal !== 'true') live('paused', 'paused while hidden');
}

if (root && typeof EventSource === 'function') {
  document.addEventListener('visibilitychange', onVisibilityChange);
  if (document.visibilityState === 'hidden' && root.dataset.terminal !== 'true') live('paused', 'paused while hidden');
  followWhileVisible();
}
