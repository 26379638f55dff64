// The Queues page: depth per queue and state, and the latest failures; bull-board (/queues)
// has every job.
import type { JobFailure, QueueDepth } from '../model/queue-overview.ts';
import { QUEUE_STATES } from '../model/queue-overview.ts';
import { isoTime } from './format.ts';
import { type Html, html, path } from './html.ts';
import { type Chrome, layout } from './layout.ts';

function depthRow(d: QueueDepth): Html {
  return html`<tr class="queue-row" data-queue="${d.queue}">
    <td>${d.queue}${d.paused ? html` <span class="badge">paused</span>` : ''}</td>
    ${QUEUE_STATES.map((s) => html`<td class="num" data-state="${s}">${d.counts[s] ?? 0}</td>`)}
  </tr>`;
}

function failureRow(f: JobFailure): Html {
  return html`<tr class="failure-row">
    <td>${isoTime(f.at)}</td><td>${f.queue}</td><td><code>${f.jobId}</code></td><td>${f.attempts}</td>
    <td>${f.goalId ? html`<a href="${path`/goals/${f.goalId}`}"><code>${f.goalId}</code></a>` : ''}</td>
    <td class="reason">${f.reason}</td>
  </tr>`;
}

export function queuesPage(chrome: Chrome, depths: QueueDepth[], failures: JobFailure[]): Html {
  const body = html`<h1>Queues</h1>
    <p>Every job, read-only: <a href="/queues">bull-board</a>. Act on goals from their pages.</p>
    <section>
      <h2>Depth</h2>
      <table class="queues">
        <thead><tr><th>queue</th>${QUEUE_STATES.map((s) => html`<th>${s}</th>`)}</tr></thead>
        <tbody>${depths.map(depthRow)}</tbody>
      </table>
    </section>
    <section>
      <h2>Recent failures</h2>
      <table class="failures">
        <thead><tr><th>when</th><th>queue</th><th>job</th><th>attempts</th><th>goal</th><th>reason</th></tr></thead>
        <tbody>${failures.map(failureRow)}</tbody>
      </table>
      ${failures.length ? '' : html`<p class="hint">No failed jobs.</p>`}
    </section>`;
  return layout(chrome, 'Queues', body);
}
