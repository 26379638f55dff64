// The Transcript page: one agent run's stored messages, by thread id.
import type { Hono } from 'hono';
import { loadTranscript } from '../../../shared/agent/transcripts.ts';
import { goalIdFromThreadId } from '../../../shared/goal/keys.ts';
import { chromeOf } from '../chrome.ts';
import type { UiContext, UiEnv } from '../context.ts';
import { errorPage } from '../views/error-page.ts';
import { transcriptPage } from '../views/transcript-page.ts';

export function registerTranscriptRoute(app: Hono<UiEnv>, ctx: UiContext): void {
  app.get('/transcripts/:threadId', async (c) => {
    const threadId = c.req.param('threadId');
    const goalId = goalIdFromThreadId(threadId);
    const t = goalId ? await loadTranscript(ctx.client, threadId) : null;
    if (!t || !goalId) {
      // A subtask's row links its run's thread before the run has ended and stored it.
      const message =
        `No transcript ${threadId}: a run's transcript is stored when the run ends (this one may still be ` +
        'running, or paused), else it is unknown or expired after its TTL (kept for debugging only).';
      return c.html(errorPage(chromeOf(c, ctx), 'No such transcript', message), 404);
    }
    return c.html(transcriptPage(chromeOf(c, ctx), { ...t, goalId }));
  });
}
