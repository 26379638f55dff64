// What every route of the inspector works with. The inspector keeps no state of its own:
// everything it shows or changes lives in Redis (and the blob store), so any number of
// replicas serve the same goals.
import type { Logger } from 'pino';
import type { GoalClient } from '../../cli/goal-client.ts';
import type { Config } from '../../shared/runtime/config.ts';
import type { DirBlobStore } from '../../shared/vfs/blob-store.ts';
import type { UiMetrics } from './metrics.ts';
import type { UiSessions } from './security/auth.ts';
import type { SignInThrottle } from './security/sign-in-throttle.ts';
import type { StreamHub } from './stream-hub.ts';

export interface UiContext {
  cfg: Config;
  /** The producer side the CLI uses: enqueue, cancel and resume go through it. */
  client: GoalClient;
  /** Spilled artifact contents, streamed. */
  blobs: DirBlobStore;
  hub: StreamHub;
  log: Logger;
  metrics: UiMetrics;
  /** DEEPQ_UI_TOKEN: when set, every request needs it. */
  token?: string;
  /** The sign-in form's sessions (with a token only). */
  sessions?: UiSessions;
  /** Wrong tokens per client address (shared by the replicas through Redis). */
  signIn: SignInThrottle;
  /** Ends every open live stream (shutdown). */
  liveStreams: Set<{ close(): void }>;
}

/** Hono's per-request variables. */
export interface UiEnv {
  Variables: {
    /** This browser's CSRF token (the cookie's value), for the forms a page renders. */
    csrf: string;
  };
}
