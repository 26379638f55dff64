// Queues: the one-glance page (depth per queue and state, recent failures) and bull-board
// mounted at /queues, read-only: deepq's jobs are changed through the goal lifecycle (cancel,
// resume), never by retrying, promoting or removing them by hand.
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { HonoAdapter } from '@bull-board/hono';
import { serveStatic } from '@hono/node-server/serve-static';
import type { Hono } from 'hono';
import { chromeOf } from '../chrome.ts';
import type { UiContext, UiEnv } from '../context.ts';
import { queueOverview } from '../model/queue-overview.ts';
import { queuesPage } from '../views/queues-page.ts';
import { offlineBoardPage } from './bull-board-offline.ts';

export const BULL_BOARD_PATH = '/queues';

export function registerQueueRoutes(app: Hono<UiEnv>, ctx: UiContext): void {
  app.get('/queues-overview', async (c) => {
    const { depths, failures } = await queueOverview(ctx);
    return c.html(queuesPage(chromeOf(c, ctx), depths, failures));
  });

  const board = new HonoAdapter(serveStatic);
  createBullBoard({
    queues: ctx.client.queues
      .allNames()
      .map((n) => new BullMQAdapter(ctx.client.queues.get(n), { readOnlyMode: true })),
    serverAdapter: board,
    options: { uiConfig: { boardTitle: 'deepq queues' } },
  });
  board.setBasePath(BULL_BOARD_PATH);
  app.get(`${BULL_BOARD_PATH}/`, (c) => c.redirect(BULL_BOARD_PATH, 301));
  app.use(BULL_BOARD_PATH, offlineBoardPage());
  app.use(`${BULL_BOARD_PATH}/*`, offlineBoardPage());
  app.route(BULL_BOARD_PATH, board.registerPlugin() as unknown as Hono<UiEnv>);
}
