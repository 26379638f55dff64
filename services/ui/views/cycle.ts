// One cycle's block on the Goal page: the plan's subtasks with their state, tokens and cap, the
// reflection, a stall, any pause or resume. static/goal-live.mjs builds the same markup from
// the same JSON when an event changes the cycle: keep the two in step (class names, data
// attributes, columns).
import type { CycleView, SubtaskView } from '../model/goal-timeline.ts';
import { count, duration } from './format.ts';
import { type Html, html, path } from './html.ts';

export function artifactHref(goalId: string, name: string): string {
  return `${path`/goals/${goalId}/artifact`}?name=${encodeURIComponent(name)}`;
}

export function transcriptHref(threadId: string): string {
  return path`/transcripts/${threadId}`;
}

function toolCalls(s: SubtaskView): string {
  if (!s.toolCalls) return '';
  return s.toolErrors ? `${s.toolCalls} (${s.toolErrors} failed)` : String(s.toolCalls);
}

function subtaskRow(goalId: string, s: SubtaskView): Html {
  return html`<tr class="subtask" data-index="${s.index}" data-state="${s.state}">
    <td class="index">${s.index}</td>
    <td class="role">${s.role}</td>
    <td class="instruction">${s.instruction ?? ''}</td>
    <td class="artifact"><a href="${artifactHref(goalId, s.artifact)}">${s.artifact}</a></td>
    <td class="read-files">${(s.readFiles ?? []).join(', ')}</td>
    <td class="state"><span class="badge state-${s.state}">${s.state}</span></td>
    <td class="tokens">${s.tokens === undefined ? '' : count(s.tokens)}</td>
    <td class="token-cap">${s.tokenCap === undefined ? '' : count(s.tokenCap)}</td>
    <td class="attempt">${s.attempt ?? ''}${s.restarted ? ' (restarted)' : ''}</td>
    <td class="duration">${duration(s.ms)}</td>
    <td class="tools">${toolCalls(s)}</td>
    <td class="reason">${s.reason ?? ''}</td>
    <td class="thread">${s.threadId ? html`<a href="${transcriptHref(s.threadId)}">transcript</a>` : ''}</td>
  </tr>`;
}

function reflection(c: CycleView): Html | string {
  const r = c.reflection;
  if (!r) return '';
  return html`<div class="reflection" data-decision="${r.decision}">
    Reflection: <strong class="decision">${r.decision}</strong> <span class="reason">${r.reason}</span>
    ${r.threadId ? html`<a class="thread" href="${transcriptHref(r.threadId)}">transcript</a>` : ''}
  </div>`;
}

function pauseAndResume(c: CycleView): Html {
  const p = c.paused;
  const paused = p
    ? html`<div class="paused" data-paused-for="${p.pausedFor}" data-budget="${p.budget ?? ''}">
        <span class="title">${p.title}</span>: <span class="reason">${p.reason}</span>
      </div>`
    : '';
  const r = c.resumed;
  const resumed = r
    ? html`<div class="resumed">
        Resumed: <span class="action">${r.action}</span>
        ${r.files ? html`<span class="files">(files: ${r.files})</span>` : ''}
        ${r.raised ? html`<span class="raised">(${r.raised})</span>` : ''}
        ${r.note ? html`<q class="note">${r.note}</q>` : ''}
      </div>`
    : '';
  return html`${paused}${resumed}`;
}

function outcome(c: CycleView): Html {
  const s = c.stalled;
  const stalled = s
    ? html`<div class="stalled" data-action="${s.action}">
        <strong class="title">${s.title}</strong>: <span class="reason">${s.reason}</span>
      </div>`
    : '';
  const evicted = c.evicted.length ? html`<div class="evicted">Evicted: ${c.evicted.join(', ')}</div>` : '';
  return html`${reflection(c)}${stalled}${pauseAndResume(c)}${evicted}`;
}

/** A cycle whose plan is gone (the goal keeps the latest; jobs and transcripts expire). */
const NO_PLAN_TEXT = 'the timeline (its instructions are no longer kept)';

export function cycleBlock(goalId: string, c: CycleView): Html {
  const planner = c.plannerThreadId
    ? html` · <a class="planner-thread" href="${transcriptHref(c.plannerThreadId)}">planner transcript</a>`
    : '';
  return html`<section class="cycle" id="cycle-${c.step}" data-step="${c.step}">
    <h3>Cycle ${c.step}</h3>
    <p class="plan-meta">plan from: <span class="plan-source">${c.planSource ?? NO_PLAN_TEXT}</span>${planner}</p>
    <table class="subtasks">
      <thead>
        <tr>
          <th>#</th><th>role</th><th>instruction</th><th>expected artifact</th><th>read_files</th><th>state</th>
          <th>tokens</th><th>token cap</th><th>attempt</th><th>duration</th><th>tool calls</th><th>failure reason</th>
          <th></th>
        </tr>
      </thead>
      <tbody>${c.subtasks.map((s) => subtaskRow(goalId, s))}</tbody>
    </table>
    ${outcome(c)}
  </section>`;
}
