// The Artifact page: an artifact's entry (status, version, writer role, step, size) and its
// content as text. The page is split around the content so spilled content can be streamed
// into it chunk by chunk (escaped) instead of being read whole.
import type { FileEntry } from '../../../shared/vfs/vfs.ts';
import { transcriptHref } from './cycle.ts';
import { bytes, isoTime } from './format.ts';
import { type Html, html, ownMarkup, path } from './html.ts';
import { type Chrome, layout } from './layout.ts';

/** Where the content goes; escaped text can never contain a `<`, so never this. */
const CONTENT_SLOT = '<!--deepq:content-->';

export function artifactRawHref(goalId: string, name: string): string {
  return `${path`/goals/${goalId}/artifact/raw`}?name=${encodeURIComponent(name)}`;
}

function meta(goalId: string, e: FileEntry): Html {
  return html`<dl class="summary artifact-meta">
    <dt>goal</dt><dd><a href="${path`/goals/${goalId}`}"><code>${goalId}</code></a></dd>
    <dt>status</dt><dd class="status">${e.status}</dd>
    <dt>version</dt><dd class="version">${e.version}</dd>
    <dt>writer role</dt><dd class="role">${e.input ? 'input: given with the goal' : (e.role ?? '')}</dd>
    <dt>step</dt><dd class="step">${e.step}</dd>
    <dt>size</dt><dd class="bytes">${bytes(e.bytes)}</dd>
    <dt>stored</dt><dd class="stored">${e.blobRef ? 'spilled to the blob store' : 'inline in Redis'}</dd>
    <dt>written</dt><dd>${isoTime(e.updatedAt)}</dd>
    <dt>writer run</dt>
    <dd>${e.threadId ? html`<a href="${transcriptHref(e.threadId)}">transcript</a>` : ''}</dd>
  </dl>`;
}

/** The page before and after its content, which the route streams in between. */
export function artifactPage(chrome: Chrome, goalId: string, e: FileEntry, gone: boolean): [string, string] {
  const content = gone
    ? html`<p class="hint">This artifact was ${e.reason ?? 'evicted'}: its content is gone.</p>`
    : html`<p><a class="download" href="${artifactRawHref(goalId, e.name)}" download>Download</a></p>
        <pre class="content" id="artifact-content">${ownMarkup(CONTENT_SLOT)}</pre>`;
  const body = html`<h1>Artifact <code class="artifact-name">${e.name}</code></h1>
    ${meta(goalId, e)} ${content}`;
  const page = String(layout(chrome, `Artifact ${e.name}`, body));
  const at = page.indexOf(CONTENT_SLOT);
  return at < 0 ? [page, ''] : [page.slice(0, at), page.slice(at + CONTENT_SLOT.length)];
}
