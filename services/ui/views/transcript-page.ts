// The Transcript page: an agent run's stored messages in order; tool calls and their results
// folded in <details>. Every text is model- or tool-written: it is only ever escaped text.
import type { Message } from '../../../shared/agent/providers/types.ts';
import { isoTime } from './format.ts';
import { type Html, html, path } from './html.ts';
import { type Chrome, layout } from './layout.ts';

export interface TranscriptData {
  threadId: string;
  role: string;
  savedAt: number;
  messages: Message[];
  goalId: string;
}

type Block = Exclude<Message['content'], string>[number];

function block(b: Block): Html {
  if (b.type === 'text') return html`<pre class="text">${b.text}</pre>`;
  if (b.type === 'thinking') {
    return html`<details class="thinking"><summary>thinking</summary><pre>${b.thinking}</pre></details>`;
  }
  if (b.type === 'redacted_thinking') return html`<p class="thinking hint">thinking (redacted by the provider)</p>`;
  if (b.type === 'tool_use') {
    return html`<details class="tool-call">
      <summary>tool call <code class="tool-name">${b.name}</code> <span class="hint">${b.id}</span></summary>
      <pre>${JSON.stringify(b.input, null, 2)}</pre>
    </details>`;
  }
  return html`<details class="tool-result${b.is_error ? ' error' : ''}">
    <summary>tool result${b.is_error ? ' (error)' : ''} <span class="hint">${b.tool_use_id}</span></summary>
    <pre>${String(b.content)}</pre>
  </details>`;
}

function message(m: Message, i: number): Html {
  const content = typeof m.content === 'string' ? html`<pre class="text">${m.content}</pre>` : m.content.map(block);
  return html`<article class="message role-${m.role}" data-index="${i}">
    <h3>${i + 1}. ${m.role}</h3>
    ${content}
  </article>`;
}

export function transcriptPage(chrome: Chrome, t: TranscriptData): Html {
  const body = html`<h1>Transcript <code>${t.threadId}</code></h1>
    <dl class="summary">
      <dt>goal</dt><dd><a href="${path`/goals/${t.goalId}`}"><code>${t.goalId}</code></a></dd>
      <dt>role</dt><dd>${t.role}</dd>
      <dt>saved</dt><dd>${isoTime(t.savedAt)}</dd>
      <dt>messages</dt><dd>${t.messages.length}</dd>
    </dl>
    <div class="transcript">${t.messages.map(message)}</div>`;
  return layout(chrome, `Transcript ${t.threadId}`, body);
}
