// One cycle's block on the Goal page: the plan's subtasks with their state, the reflection,
// any pause or resume. static/goal-live.mjs builds the same markup from the same JSON when
// an event changes the cycle: keep the two in step (class names, data attributes, columns).
import type { CycleView, SubtaskView } from '../model/goal-timeline.ts';
import { duration } from './format.ts';
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
    <td class="attempt">${s.attempt ?? ''}</td>
    <td class="duration">${duration(s.ms)}</td>
    <td class="tools">${toolCalls(s)}</td>
    <td class="reason">${s.reason ?? ''}</td>
    <td class="thread">${s.threadId ? html`<a href="${transcriptHref(s.threadId)}">transcript</a>` : ''}</td>
  </tr>`;
}

function outcome(c: CycleView): Html {
  const r = c.reflection;
  const reflection = r
    ? html`<div class="reflection" data-decision="${r.decision}">
        Reflection: <strong class="decision">${r.decision}</strong> <span class="reason">${r.reason}</span>
        ${r.threadId ? html`<a class="thread" href="${transcriptHref(r.threadId)}">transcript</a>` : ''}
      </div>`
    : '';
  const paused = c.paused
    ? html`<div class="paused">Paused for ${c.paused.pausedFor}: <span class="reason">${c.paused.reason}</span></div>`
    : '';
  const resumed = c.resumed
    ? html`<div class="resumed">
        Resumed: <span class="action">${c.resumed.action}</span>
        ${c.resumed.note ? html`<q class="note">${c.resumed.note}</q>` : ''}
      </div>`
    : '';
  const evicted = c.evicted.length ? html`<div class="evicted">Evicted: ${c.evicted.join(', ')}</div>` : '';
  return html`${reflection}${paused}${resumed}${evicted}`;
}

export function cycleBlock(goalId: string, c: CycleView): Html {
  const planner = c.plannerThreadId
    ? html` · <a class="planner-thread" href="${transcriptHref(c.plannerThreadId)}">planner transcript</a>`
    : '';
  return html`<section class="cycle" id="cycle-${c.step}" data-step="${c.step}">
    <h3>Cycle ${c.step}</h3>
    <p class="plan-meta">plan from: <span class="plan-source">${c.planSource ?? 'timeline only'}</span>${planner}</p>
    <table class="subtasks">
      <thead>
        <tr>
          <th>#</th><th>role</th><th>instruction</th><th>expected artifact</th><th>read_files</th><th>state</th>
          <th>attempt</th><th>duration</th><th>tool calls</th><th>failure reason</th><th></th>
        </tr>
      </thead>
      <tbody>${c.subtasks.map((s) => subtaskRow(goalId, s))}</tbody>
    </table>
    ${outcome(c)}
  </section>`;
}
