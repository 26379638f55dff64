// The SDKs read some settings from the environment on their own: ANTHROPIC_CUSTOM_HEADERS and
// OPENAI_CUSTOM_HEADERS add headers to every request to every endpoint of that type (a local
// gateway got a team token meant for one), and ANTHROPIC_LOG prints request dumps past pino's
// secret scrubbing. deepq's config says what each provider sends; the environment does not.

/**
 * The default headers to give an SDK: the configured ones, and each header the SDK would add
 * from `envVar` (`name: value` lines) set to null, which the SDK reads as "send none".
 */
export function headersOverEnv(
  envVar: 'ANTHROPIC_CUSTOM_HEADERS' | 'OPENAI_CUSTOM_HEADERS',
  headers: Record<string, string> | undefined,
): Record<string, string | null> | undefined {
  const fromEnv = (process.env[envVar] ?? '')
    .split('\n')
    .map((line) => line.slice(0, line.indexOf(':')).trim())
    .filter((name, i, all) => name && all.indexOf(name) === i);
  if (!fromEnv.length) return headers;
  return { ...Object.fromEntries(fromEnv.map((name) => [name, null])), ...headers };
}
