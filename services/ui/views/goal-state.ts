// The parts of the Goal page that a snapshot (model/goal-snapshot.ts) fills: budgets,
// artifacts, tokens by role and model, and the decisions block. static/goal-live.mjs
// re-renders each from the snapshot JSON with the same markup: keep the two in step.
import type { DecisionAction, DecisionField, DecisionView } from '../decisions/types.ts';
import type { ArtifactLine, BudgetLine, UsageLine } from '../model/goal-snapshot.ts';
import { type Html, html } from './html.ts';
import { type Chrome, csrfField } from './layout.ts';

export function budgetRow(b: BudgetLine): Html {
  const pct = b.share === null ? '' : `${Math.round(b.share * 100)}%`;
  const paused = b.paused ? html` <span class="paused-mark">paused here</span>` : '';
  return html`<tr class="budget" data-budget="${b.name}" data-paused="${b.paused ? 'true' : 'false'}">
    <td class="name">${b.name}${paused}</td><td class="used">${b.used}</td><td class="limit">${b.limit}</td>
    <td class="share">${b.share === null ? '' : html`<meter min="0" max="1" value="${b.share}"></meter> ${pct}`}</td>
  </tr>`;
}

export function artifactRow(a: ArtifactLine): Html {
  return html`<tr class="artifact-row" data-name="${a.name}">
    <td class="name">${a.href ? html`<a href="${a.href}">${a.name}</a>` : a.name}</td>
    <td class="status">${a.status}</td><td class="version">v${a.version}</td><td class="role">${a.role}</td>
    <td class="step">${a.step}</td><td class="bytes">${a.bytes}</td><td class="stored">${a.stored}</td>
  </tr>`;
}

export function usageRow(u: UsageLine): Html {
  // Like `deepq status`: counts an endpoint did not report are deepq's estimate, and say so.
  const estimated = u.estimated ? html` <span class="estimated">(estimated)</span>` : '';
  return html`<tr class="usage-row" data-estimated="${u.estimated ? 'true' : 'false'}">
    <td class="role">${u.role}</td><td class="model">${u.model}${estimated}</td>
    <td class="input">${u.input}</td><td class="output">${u.output}</td>
    <td class="cache-read">${u.cacheRead}</td><td class="cache-write">${u.cacheWrite}</td>
  </tr>`;
}

function field(f: DecisionField): Html {
  const input =
    f.kind === 'text'
      ? html`<textarea name="${f.name}" rows="2" maxlength="${f.maxChars ?? 2000}"></textarea>`
      : f.kind === 'files'
        ? html`<input type="file" name="${f.name}" multiple />`
        : html`<input type="number" name="${f.name}" min="0" step="${f.step ?? 'any'}" />`;
  return html`<label>${f.label}${input}</label>`;
}

function actionForm(chrome: Chrome, a: DecisionAction): Html {
  const files = a.fields?.some((f) => f.kind === 'files');
  const enctype = files ? 'multipart/form-data' : 'application/x-www-form-urlencoded';
  return html`<form method="post" action="${a.path}" class="action" enctype="${enctype}">
    ${csrfField(chrome)}${(a.fields ?? []).map(field)}<button class="${a.tone}">${a.label}</button>
  </form>`;
}

export function decisionCard(chrome: Chrome, d: DecisionView): Html {
  return html`<div class="decision-card" id="decision-${d.id}" data-kind="${d.kind}">
    <h3 class="title">${d.title}</h3>
    ${d.detail ? html`<p class="detail">${d.detail}</p>` : ''}
    ${d.content === undefined ? '' : html`<pre class="content">${d.content}</pre>`}
    <div class="actions">${d.actions.map((a) => actionForm(chrome, a))}</div>
  </div>`;
}
