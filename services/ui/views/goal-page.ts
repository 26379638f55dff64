// The Goal page: the goal's text and status, what can be decided now, budgets, each cycle,
// artifacts, tokens, recent activity and stored transcripts. static/goal-live.mjs keeps it
// current from the goal's event stream, starting after `lastEventId`.
import type { GoalRecord } from '../../../shared/goal/store.ts';
import type { GoalSnapshot } from '../model/goal-snapshot.ts';
import type { CycleView } from '../model/goal-timeline.ts';
import { cycleBlock, transcriptHref } from './cycle.ts';
import { isoTime } from './format.ts';
import { artifactRow, budgetRow, decisionCard, usageRow } from './goal-state.ts';
import { type Html, html, path } from './html.ts';
import { type Chrome, layout } from './layout.ts';

export interface GoalPageData {
  goal: GoalRecord;
  snapshot: GoalSnapshot;
  cycles: CycleView[];
  /** The last timeline entry the page shows: live updates start after it. */
  lastEventId: string;
  /** The latest timeline lines, oldest first. */
  activity: string[];
  /**
   * The goal's timeline no longer starts at its creation (it keeps the last `eventsMaxLen`
   * entries): the first cycle it still shows, and that bound.
   */
  trimmed?: { firstCycle: number | undefined; kept: number };
  /** The goal's OpenTelemetry trace id, and its page in the trace backend when configured. */
  trace?: { id: string; url?: string };
}

/** The trace row of the summary: the id, a link when the deployment says where traces are shown. */
function traceRow(t: GoalPageData['trace']): Html | string {
  if (!t) return '';
  const id = html`<code>${t.id}</code>`;
  const shown = t.url ? html`<a href="${t.url}" rel="noreferrer">${id}</a>` : id;
  return html`<dt>trace</dt><dd id="goal-trace">${shown}</dd>`;
}

/** Says that older cycles are not shown, and that the first one shown may be partial. */
function trimmedNote(t: GoalPageData['trimmed']): Html | string {
  if (!t) return '';
  const from =
    t.firstCycle === undefined
      ? ''
      : html` Cycles before ${t.firstCycle} are not shown; cycle
    ${t.firstCycle} may be shown in part.`;
  return html`<p id="timeline-trimmed" class="note">The goal's timeline keeps its last ${t.kept.toLocaleString('en-US')}
    entries (<code>eventsMaxLen</code>).${from}</p>`;
}

function header(d: GoalPageData): Html {
  const s = d.snapshot;
  // static/goal-live.mjs takes it from here (data-state `live` once it follows the goal).
  const [state, label] = s.terminal ? ['finished', 'finished'] : ['static', 'live updates need JavaScript'];
  return html`<header class="goal-head">
    <h1>Goal <code>${s.goalId}</code></h1>
    <p class="goal-text">${d.goal.goal}</p>
    <dl class="summary">
      <dt>status</dt><dd role="status"><span id="goal-status" class="badge status-${s.status}">${s.status}</span></dd>
      <dt>cycles</dt><dd id="goal-step">${s.step}</dd>
      <dt>tokens</dt><dd id="goal-tokens">${s.tokens}</dd>
      <dt>cost</dt><dd id="goal-cost">${s.cost}</dd>
      <dt>created</dt><dd>${isoTime(d.goal.createdAt)}</dd>
      <dt>review</dt><dd>${d.goal.review ? 'after every reflection' : 'no'}</dd>
      ${traceRow(d.trace)}
    </dl>
    <p class="reason" id="goal-reason">${s.reason}</p>
    <p id="live-state" class="live" role="status" data-state="${state}">${label}</p>
  </header>`;
}

function tables(d: GoalPageData): Html {
  const s = d.snapshot;
  return html`<section>
      <h2>Artifacts</h2>
      <table class="artifacts">
        <thead><tr><th>name</th><th>status</th><th>version</th><th>writer role</th><th>step</th><th>size</th>
        <th>stored</th></tr></thead>
        <tbody id="artifact-rows">${s.artifacts.map(artifactRow)}</tbody>
      </table>
    </section>
    <section>
      <h2>Tokens by role and model</h2>
      <p class="hint">The goal's tokens by role and model; each subtask's own are in its cycle's table.</p>
      <table class="usage">
        <thead>
          <tr><th>role</th><th>model</th><th>input</th><th>output</th><th>cache read</th><th>cache write</th></tr>
        </thead>
        <tbody id="usage-rows">${s.usage.map(usageRow)}</tbody>
      </table>
    </section>`;
}

function activity(d: GoalPageData): Html {
  return html`<section>
      <h2>Activity</h2>
      <ol id="activity-log" class="activity" role="log" aria-label="activity">
        ${d.activity.map((line) => html`<li>${line}</li>`)}
      </ol>
    </section>
    <section>
      <h2>Stored transcripts</h2>
      <ul class="threads" id="thread-list">
        ${d.snapshot.threads.map((t) => html`<li><a href="${transcriptHref(t)}">${t}</a></li>`)}
      </ul>
    </section>`;
}

export function goalPage(chrome: Chrome, d: GoalPageData): Html {
  const s = d.snapshot;
  const body = html`<div
      id="goal"
      data-goal-id="${s.goalId}"
      data-last-event-id="${d.lastEventId}"
      data-events-url="${path`/goals/${s.goalId}/events`}"
      data-terminal="${s.terminal ? 'true' : 'false'}"
    >
      ${header(d)}
      <section>
        <h2>Decisions</h2>
        <div id="decisions">${s.decisions.map((x) => decisionCard(chrome, x))}</div>
      </section>
      <section>
        <h2>Budgets</h2>
        <table class="budgets">
          <thead><tr><th>budget</th><th>spent</th><th>limit</th><th></th></tr></thead>
          <tbody id="budget-rows">${s.budgets.map(budgetRow)}</tbody>
        </table>
      </section>
      <section>
        <h2>Cycles</h2>
        ${trimmedNote(d.trimmed)}
        <div id="cycles">${d.cycles.map((c) => cycleBlock(s.goalId, c))}</div>
      </section>
      ${tables(d)} ${activity(d)}
    </div>`;
  return layout(chrome, `Goal ${s.goalId}`, body, { script: '/static/goal-live.mjs' });
}
