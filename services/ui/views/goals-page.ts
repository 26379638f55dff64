// The Goals page: the table (status filter, newest first, paginated) and the enqueue form.
import { randomUUID } from 'node:crypto';
import { GOAL_STATUSES } from '../../../shared/goal/status.ts';
import type { GoalPage, GoalRow } from '../model/goal-list.ts';
import { age, count } from './format.ts';
import { formValue, type Html, html, path } from './html.ts';
import { type Chrome, csrfField, layout } from './layout.ts';

/** What the enqueue form shows again after a refusal. */
export interface EnqueueForm {
  goal?: string;
  maxTokens?: string;
  maxSteps?: string;
  maxSeconds?: string;
  onBudget?: string;
  review?: boolean;
  /** The form's idempotency key: the same form sent twice (a double click, a resend) makes one goal. */
  key?: string;
  error?: string;
}

function goalRow(r: GoalRow, now: number): Html {
  return html`<tr class="goal-row" data-goal-id="${r.goalId}">
    <td class="id"><a href="${path`/goals/${r.goalId}`}"><code>${r.goalId}</code></a></td>
    <td class="status"><span class="badge status-${r.status}">${r.status}</span></td>
    <td class="num cycles">${r.cycles}</td>
    <td class="num tokens">${count(r.tokens)}</td>
    <td class="num cost">${r.cost}</td>
    <td class="num age">${age(r.createdAt, now)}</td>
    <td class="text">${r.text}</td>
  </tr>`;
}

function filter(status: string | undefined): Html {
  const option = (s: string) => html`<option value="${s}" ${s === status ? 'selected' : ''}>${s}</option>`;
  return html`<form method="get" action="/" class="filter">
    <label>status
      <select name="status">
        <option value="">any</option>
        ${GOAL_STATUSES.map(option)}
      </select>
    </label>
    <button>Filter</button>
  </form>`;
}

function pager(p: GoalPage, status: string | undefined): Html {
  const link = (page: number) => `/?page=${page}${status ? `&status=${encodeURIComponent(status)}` : ''}`;
  return html`<p class="pager">
    ${p.page > 1 ? html`<a rel="prev" href="${link(p.page - 1)}">← newer</a>` : ''}
    <span>page ${p.page}</span>
    ${p.hasNext ? html`<a rel="next" href="${link(p.page + 1)}">older →</a>` : ''}
  </p>`;
}

/** What a goal does when a budget runs out; empty: the configured default. */
function onBudgetSelect(value: string | undefined): Html {
  const option = (v: string, label: string) =>
    html`<option value="${v}" ${v === (value ?? '') ? 'selected' : ''}>${label}</option>`;
  return html`<label>at a budget
    <select name="onBudget">
      ${option('', 'as configured')} ${option('end', 'end the goal')} ${option('pause', 'pause for a human')}
    </select>
  </label>`;
}

function enqueueForm(chrome: Chrome, f: EnqueueForm): Html {
  // Tokens and cycles are whole; seconds need not be (the CLI's --max-seconds 2.5 is).
  const num = (name: string, label: string, value: string | undefined, step = '1') =>
    html`<label>${label}<input type="number" name="${name}" min="${step === '1' ? '1' : '0'}" step="${step}" value="${
      value ?? ''
    }" /></label>`;
  return html`<form method="post" action="/goals" class="enqueue" id="enqueue" enctype="multipart/form-data">
    ${csrfField(chrome)}
    <input type="hidden" name="key" value="${formValue(f.key ?? `ui-${randomUUID()}`)}" />
    ${f.error ? html`<p class="error" role="alert">${f.error}</p>` : ''}
    <label>Goal<textarea name="goal" rows="3" required maxlength="102400">${formValue(f.goal ?? '')}</textarea></label>
    <div class="row">
      ${num('maxTokens', 'max tokens', f.maxTokens)} ${num('maxSteps', 'max cycles', f.maxSteps)}
      ${num('maxSeconds', 'max seconds', f.maxSeconds, 'any')} ${onBudgetSelect(f.onBudget)}
      <label class="check"><input type="checkbox" name="review" value="1" ${f.review ? 'checked' : ''} />
        pause for review after every reflection</label>
    </div>
    <label>Files the agents start with (text, up to 16 MiB in all)
      <input type="file" name="files" multiple /></label>
    <button class="primary">Enqueue</button>
  </form>`;
}

export function goalsPage(chrome: Chrome, p: GoalPage, status: string | undefined, form: EnqueueForm = {}): Html {
  const now = Date.now();
  const body = html`<h1>Goals</h1>
    <section><h2>New goal</h2>${enqueueForm(chrome, form)}</section>
    <section>
      <h2>Goals</h2>
      ${filter(status)}
      <table class="goals">
        <thead><tr><th>goal</th><th>status</th><th>cycles</th><th>tokens</th><th>est. cost</th><th>age</th>
        <th>text</th></tr></thead>
        <tbody>${p.rows.map((r) => goalRow(r, now))}</tbody>
      </table>
      ${p.rows.length ? '' : html`<p class="hint">No goals${status ? html` with status ${status}` : ''}.</p>`}
      ${pager(p, status)}
    </section>`;
  return layout(chrome, 'Goals', body);
}
