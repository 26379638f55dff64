// The DEEPQ_* environment variables deepq reads. One it does not know is most likely a
// misspelt setting (a letter short of DEEPQ_MAX_TOKENS): silently ignored, the goal ran with
// the default. It is named at start, with the nearest known name.

/** Read outside the config's own map (ENV_MAP in config.ts): by the CLI, the bench, the tests. */
const OTHER_NAMES = [
  'DEEPQ_CONFIG',
  'DEEPQ_DEBUG',
  'DEEPQ_FROM_SOURCE',
  'DEEPQ_IMPORT_TRACE',
  'DEEPQ_MCP_SERVER',
  'DEEPQ_UI_TOKEN',
  'DEEPQ_DEMO_REDIS_PORT',
  'DEEPQ_IMAGE',
  'DEEPQ_BENCH_QUICK',
  'DEEPQ_BENCH_RUSAGE',
  'DEEPQ_TEST_CONCURRENCY',
  'DEEPQ_TEST_LOCAL_KEY',
  'DEEPQ_CHROMIUM',
  'DEEPQ_UPDATE_DOCS_SCREENSHOT',
];

/**
 * A warning naming each DEEPQ_* variable in `env` that is neither in `configNames` nor read
 * elsewhere, nor named by the config itself (a provider's key variable), or undefined.
 */
export function unknownEnvNotice(
  env: NodeJS.ProcessEnv,
  configNames: readonly string[],
  named: string,
): string | undefined {
  const known = new Set([...configNames, ...OTHER_NAMES]);
  const unknown = Object.keys(env)
    .filter((name) => name.startsWith('DEEPQ_') && !known.has(name) && !named.includes(name))
    .sort();
  if (!unknown.length) return undefined;
  const each = unknown.map((name) => {
    const near = nearest(name, [...known]);
    return near ? `${name} (did you mean ${near}?)` : name;
  });
  return `deepq: ignoring ${each.join(', ')}: not a deepq setting (the README's Configuration lists them)`;
}

/** The known name within 3 edits of `name` (the closest), if any. */
function nearest(name: string, known: string[]): string | undefined {
  let best: { name: string; d: number } | undefined;
  for (const k of known) {
    const d = editDistance(name, k);
    if (d <= 3 && (!best || d < best.d)) best = { name: k, d };
  }
  return best?.name;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length]!;
}
