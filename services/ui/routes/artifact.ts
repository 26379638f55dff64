// The Artifact page and its download. Spilled content is streamed from the blob store, the
// page escaping each chunk; the download is the raw bytes as an attachment, sandboxed.
import type { Context, Hono } from 'hono';
import { stream } from 'hono/streaming';
import { isGoalId } from '../../../shared/goal/ids.ts';
import { chromeOf } from '../chrome.ts';
import type { UiContext, UiEnv } from '../context.ts';
import { type ArtifactBody, type OpenArtifact, openArtifact } from '../model/artifact-content.ts';
import { artifactPage } from '../views/artifact-page.ts';
import { errorPage } from '../views/error-page.ts';
import { escapeHtml, path, quoted } from '../views/html.ts';

async function find(c: Context<UiEnv>, ctx: UiContext): Promise<OpenArtifact | Response> {
  const goalId = c.req.param('id') ?? '';
  const name = c.req.query('name') ?? '';
  const found = isGoalId(goalId) && name ? await openArtifact(ctx, goalId, name) : null;
  if (found) return found;
  const back = isGoalId(goalId) ? path`/goals/${goalId}` : '/';
  // What the address asked for is quoted, cut and never a goal id it is not: a link crafted to
  // put words on the page ("your session expired: …") must not read as the inspector's own.
  // A cycle's expected artifact is linked before its subtask has written it.
  const why = ' (not yet: a subtask that writes it may still run; or it was evicted or never written)';
  const asked = isGoalId(goalId) ? `Goal ${goalId} has no artifact ${quoted(name)}${why}.` : 'No such goal.';
  return c.html(errorPage(chromeOf(c, ctx), 'No such artifact', asked, back), 404);
}

/** Writes the body's text, each chunk through `encode`; a read error ends it with a note. */
async function pipeBody(
  ctx: UiContext,
  body: ArtifactBody,
  write: (s: string) => Promise<unknown>,
  encode: (s: string) => string,
) {
  if (body.kind === 'inline') return write(encode(body.text));
  if (body.kind !== 'spilled') return;
  try {
    for await (const chunk of body.stream) await write(encode(chunk as string));
  } catch (err) {
    ctx.log.warn({ err: { message: (err as Error).message } }, 'blob read failed mid-stream');
    await write(encode('\n[deepq: the rest of this artifact could not be read]\n'));
  } finally {
    body.stream.destroy();
  }
}

export function registerArtifactRoutes(app: Hono<UiEnv>, ctx: UiContext): void {
  app.get('/goals/:id/artifact', async (c) => {
    const found = await find(c, ctx);
    if (found instanceof Response) return found;
    const [head, tail] = artifactPage(chromeOf(c, ctx), c.req.param('id'), found.entry, found.body.kind === 'gone');
    c.header('content-type', 'text/html; charset=utf-8');
    return stream(c, async (s) => {
      s.onAbort(() => {
        if (found.body.kind === 'spilled') found.body.stream.destroy();
      });
      await s.write(head);
      await pipeBody(ctx, found.body, (t) => s.write(t), escapeHtml);
      await s.write(tail);
    });
  });

  app.get('/goals/:id/artifact/raw', async (c) => {
    const found = await find(c, ctx);
    if (found instanceof Response) return found;
    if (found.body.kind === 'gone') return c.text('this artifact was evicted: its content is gone\n', 410);
    const file = found.entry.name.split('/').pop() || 'artifact';
    c.header('content-type', 'application/octet-stream');
    c.header(
      'content-disposition',
      `attachment; filename="${file.replace(/[^\w.-]/g, '_')}"; filename*=UTF-8''${encodeURIComponent(file)}`,
    );
    // Opened in a tab anyway, the bytes run nothing.
    c.header('content-security-policy', "default-src 'none'; sandbox");
    return stream(c, async (s) => {
      s.onAbort(() => {
        if (found.body.kind === 'spilled') found.body.stream.destroy();
      });
      await pipeBody(
        ctx,
        found.body,
        (t) => s.write(t),
        (t) => t,
      );
    });
  });
}
