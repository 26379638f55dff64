// Secrets scrubbed from free text. Apart from logger.ts (which re-exports it) so that the CLI can
// scrub its error lines without loading pino.

const SECRET_PATTERNS: RegExp[] = [/sk-ant-[A-Za-z0-9_-]+/g, /(rediss?:\/\/[^:@/\s]*:)[^@\s]+@/g];

/**
 * Scrubs API keys and Redis passwords from free text (error messages, log strings, tool results),
 * each secret also as JSON writes it inside a string (a quote or a backslash escaped): a tool
 * result of structured content, or a server's own JSON text, carries it that way.
 */
export function scrubSecrets(text: string, extraSecrets: string[] = []): string {
  let out = text.replace(SECRET_PATTERNS[0]!, 'sk-ant-***').replace(SECRET_PATTERNS[1]!, '$1***@');
  for (const s of extraSecrets) {
    if (!s || s.length < 6) continue;
    out = out.split(s).join('***');
    const escaped = JSON.stringify(s).slice(1, -1);
    if (escaped !== s) out = out.split(escaped).join('***');
  }
  return out;
}
