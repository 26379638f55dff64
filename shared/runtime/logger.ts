// pino JSON logs; secrets never reach the output.
import { type DestinationStream, type Logger, pino } from 'pino';
import { escapeRawInJson } from './bidi.ts';
import { scrubSecrets } from './scrub.ts';
import { traceIdsForLog } from './tracing.ts';

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

/**
 * stdout as pino's default writes it, each line with C1 and bidi controls escaped: a model's text
 * in a logged reason must not act on the terminal of `deepq up` (pino's JSON escapes only C0).
 */
function terminalSafeStdout(): DestinationStream {
  const out = pino.destination(process.stdout.fd);
  return { write: (line: string) => out.write(escapeRawInJson(line)) };
}

export function createLogger(level: string, bindings: Record<string, unknown> = {}, secrets: string[] = []): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid, ...bindings },
      redact: { paths: REDACT_PATHS, censor: '***' },
      // With tracing on, a line written inside a span carries its ids (a log backend links to the trace).
      mixin: traceIdsForLog,
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
    },
    terminalSafeStdout(),
  );
}

export type { Logger };
