// Secrets scrubbed from free text. Apart from logger.ts (which re-exports it) so that the CLI can
// scrub its error lines without loading pino.

const SECRET_PATTERNS: RegExp[] = [/sk-ant-[A-Za-z0-9_-]+/g, /(rediss?:\/\/[^:@/\s]*:)[^@\s]+@/g];

/** Scrubs API keys and Redis passwords from free text (error messages, log strings). */
export function scrubSecrets(text: string, extraSecrets: string[] = []): string {
  let out = text.replace(SECRET_PATTERNS[0]!, 'sk-ant-***').replace(SECRET_PATTERNS[1]!, '$1***@');
  for (const s of extraSecrets) if (s && s.length >= 6) out = out.split(s).join('***');
  return out;
}
