// pino JSON logs; secrets never reach the output.
import { type Logger, pino } from 'pino';
import { scrubSecrets } from './scrub.ts';

export const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'anthropicApiKey',
  '*.anthropicApiKey',
  'password',
  '*.password',
  'headers.authorization',
  '*.headers.authorization',
  'headers["x-api-key"]',
  '*.headers["x-api-key"]',
];

export { scrubSecrets };

export function createLogger(level: string, bindings: Record<string, unknown> = {}, secrets: string[] = []): Logger {
  return pino({
    level,
    base: { pid: process.pid, ...bindings },
    redact: { paths: REDACT_PATHS, censor: '***' },
    hooks: {
      // Redaction by path misses secrets inside strings (an error message echoing a URL).
      logMethod(args, method) {
        const scrubbed = args.map((a) => (typeof a === 'string' ? scrubSecrets(a, secrets) : a));
        return method.apply(this, scrubbed as Parameters<typeof method>);
      },
    },
    formatters: {
      log(obj) {
        const err = obj.err as { message?: string; stack?: string } | undefined;
        if (err && typeof err === 'object') {
          return {
            ...obj,
            err: {
              ...err,
              message: scrubSecrets(String(err.message ?? ''), secrets),
              stack: scrubSecrets(String(err.stack ?? ''), secrets),
            },
          };
        }
        return obj;
      },
    },
  });
}

export type { Logger };
