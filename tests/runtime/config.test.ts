// Config: defaults < file < env; a bad value names its field; the provider default. (A
// service process stopping on a bad config: config-start.int.test.ts.)

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { plannerSpec } from '../../services/planner/prompt.ts';
import { reflectorSpec } from '../../services/reflector/prompt.ts';
import { createProvider } from '../../shared/agent/providers/index.ts';
import { ConfigError } from '../../shared/errors.ts';
import { CONFIG_ENV_NAMES, loadConfig } from '../../shared/runtime/config.ts';
import { unknownEnvNotice } from '../../shared/runtime/env-names.ts';
import { tempDir } from '../../testing/temp-dir.ts';

const dir = tempDir('deepq-cfg-');
function file(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

test('defaults: three roles, max depth 5, concurrency 8, prefix deepq, local Redis', () => {
  const c = loadConfig({});
  assert.deepEqual(
    c.roles.map((r) => r.name),
    ['research-specialist', 'code-writer', 'critic'],
  );
  assert.equal(c.maxDepth, 5);
  assert.equal(c.concurrency, 8);
  assert.equal(c.prefix, 'deepq');
  assert.equal(c.redisUrl, 'redis://127.0.0.1:6379');
});

test('without a key the provider is scripted, with a notice; with a key, anthropic', () => {
  const a = loadConfig({});
  assert.equal(a.modelProvider, 'scripted');
  assert.match(a.providerNotice!, /scripted/);
  assert.deepEqual(a.models, { HIGH: 'scripted-high', LOW: 'scripted-low' });
  const b = loadConfig({ ANTHROPIC_API_KEY: 'sk-ant-x' });
  assert.equal(b.modelProvider, 'anthropic');
  assert.match(b.models.HIGH, /^claude-/);
  assert.equal(loadConfig({ DEEPQ_MODEL_HIGH: 'my-model' }).models.HIGH, 'my-model');
  assert.match(b.providerNotice!, /anthropic/);
  assert.equal(
    loadConfig({ ANTHROPIC_API_KEY: 'sk-ant-x', DEEPQ_MODEL_PROVIDER: 'scripted' }).providerNotice,
    undefined,
  );
});

test('asking for anthropic without a key stops a service at start naming the field; the CLI needs no key', () => {
  // The CLI loads the config only: it never calls a model, so the deployment's env is enough.
  const cfg = loadConfig({ DEEPQ_MODEL_PROVIDER: 'anthropic' });
  assert.equal(cfg.modelProvider, 'anthropic');
  assert.throws(
    () => createProvider(cfg),
    (e: Error) => e instanceof ConfigError && /anthropicApiKey \(ANTHROPIC_API_KEY\) is required/.test(e.message),
  );
});

test('env overrides the file, and a bad env value names the variable', () => {
  const p = file('a.json', JSON.stringify({ maxDepth: 3, prefix: 'fromfile' }));
  const c = loadConfig({ DEEPQ_CONFIG: p, DEEPQ_PREFIX: 'fromenv' });
  assert.equal(c.maxDepth, 3);
  assert.equal(c.prefix, 'fromenv');
  assert.throws(() => loadConfig({ DEEPQ_MAX_DEPTH: 'five' }), /DEEPQ_MAX_DEPTH="five": expected an integer/);
  assert.throws(
    () => loadConfig({ DEEPQ_CONCURRENCY: '0x10' }),
    /DEEPQ_CONCURRENCY="0x10": expected an integer in decimal/,
  );
  assert.equal(loadConfig({ DEEPQ_SPILL_BYTES: '1e6' }).vfs.spillBytes, 1_000_000, 'an exponent is still decimal');
  assert.throws(() => loadConfig({ METRICS_PORT: '99999' }), /metricsPort \(METRICS_PORT\)/);
  assert.throws(() => loadConfig({ DEEPQ_MODEL_PROVIDER: 'openai' }), /modelProvider \(DEEPQ_MODEL_PROVIDER\)/);
  assert.throws(
    () => loadConfig({ ANTHROPIC_API_KEY: 'replace-with-your-anthropic-api-key' }),
    /anthropicApiKey \(ANTHROPIC_API_KEY\): is the example placeholder/,
  );
  assert.throws(() => loadConfig({ REDIS_URL: 'http://x' }), /redisUrl \(REDIS_URL\): must start with redis:\/\//);
  // What ioredis would misread: SELECT NaN, or a URL it cannot parse at all.
  assert.throws(
    () => loadConfig({ REDIS_URL: 'redis://h:6379/abc' }),
    /REDIS_URL\): the path "\/abc" must be a database/,
  );
  assert.throws(
    () => loadConfig({ REDIS_URL: 'redis://:ab#cd@h:6379' }),
    /REDIS_URL\): is not a valid URL \(percent-enc/,
  );
  assert.equal(loadConfig({ REDIS_URL: 'rediss://u:p%23q@h:6380/3' }).redisUrl, 'rediss://u:p%23q@h:6380/3');
  // No host: ioredis went to localhost:6379, a Redis nobody named.
  for (const REDIS_URL of ['redis://', 'redis:///5', 'rediss://'])
    assert.throws(() => loadConfig({ REDIS_URL }), /redisUrl \(REDIS_URL\): has no host \(redis:\/\/HOST:PORT\)/);
  // A timeout past what a Node timer holds would fire after 1 ms: every model call a timeout.
  assert.throws(
    () => loadConfig({ DEEPQ_MODEL_TIMEOUT_MS: '3000000000' }),
    /modelTimeoutMs \(DEEPQ_MODEL_TIMEOUT_MS\): at most 2147483647 ms \(24\.8 days: the longest a timer waits\)/,
  );
  assert.equal(loadConfig({ DEEPQ_MODEL_TIMEOUT_MS: '2147483647' }).modelTimeoutMs, 2_147_483_647);
  // The hard stop 10 s after the drain must fit a timer too, or SIGTERM would skip the drain.
  assert.throws(
    () => loadConfig({ DEEPQ_DRAIN_TIMEOUT_MS: '2147483000' }),
    /drainTimeoutMs \(DEEPQ_DRAIN_TIMEOUT_MS\): at most 2147423647 ms/,
  );
});

test('a config file with wrong types names each bad field', () => {
  const p = file(
    'bad.yaml',
    'maxDepth: "deep"\nvfs:\n  spillBytes: -1\nroles:\n  - name: only-one\n    systemPrompt: hi\n',
  );
  assert.throws(
    () => loadConfig({ DEEPQ_CONFIG: p }),
    (e: Error) => {
      assert.ok(e instanceof ConfigError);
      assert.match(e.message, /maxDepth/);
      assert.match(e.message, /vfs\.spillBytes/);
      assert.match(e.message, /roles: deepq needs 3 to 8 roles/);
      return true;
    },
  );
  assert.throws(() => loadConfig({ DEEPQ_CONFIG: file('typo.json', '{"maxDepht": 3}') }), /maxDepht/);
  assert.throws(() => loadConfig({ DEEPQ_CONFIG: file('broken.json', '{') }), /not valid JSON/);
  // A tag YAML does not know loaded as a plain string, with only a warning: refused.
  assert.throws(
    () => loadConfig({ DEEPQ_CONFIG: file('tag.yaml', 'concurrency: !!js/function "x"\n') }),
    /not valid YAML: Unresolved tag: tag:yaml\.org,2002:js\/function/,
  );
  assert.throws(() => loadConfig({ DEEPQ_CONFIG: join(dir, 'missing.json') }), /cannot read config file/);
});

test('a misspelt key in budgets, models, stall, vfs, modelRetry or a price is refused, naming it', () => {
  // Dropped in silence before: `maxToken` made a goal with no token budget at all.
  const typos: [Record<string, unknown>, RegExp][] = [
    [{ budgets: { maxToken: 5 } }, /budgets: Unrecognized key: "maxToken"/],
    [{ models: { HIHG: 'claude-x' } }, /models: Unrecognized key: "HIHG"/],
    [{ stall: { cycle: 2 } }, /stall: Unrecognized key: "cycle"/],
    [{ vfs: { maxArtifactByte: 10 } }, /vfs: Unrecognized key: "maxArtifactByte"/],
    [{ modelRetry: { maxRetry: 1 } }, /modelRetry: Unrecognized key: "maxRetry"/],
    [
      { prices: { m: { inputPerMTok: 1, outputPerMTok: 2, cachedRead: 1 } } },
      /prices\.m: Unrecognized key: "cachedRead"/,
    ],
  ];
  for (const [cfg, message] of typos) {
    assert.throws(
      () => loadConfig({ DEEPQ_CONFIG: file('typo.json', JSON.stringify(cfg)) }),
      (e: Error) => e instanceof ConfigError && message.test(e.message),
      JSON.stringify(cfg),
    );
  }
});

test("a misspelt key in a role, the planner's or the reflector's section is refused, naming it", () => {
  // `approvals` for `approval`: dropped in silence, the gated tool ran without asking anyone.
  const typo = { roles: [{ name: 'code-writer', approvals: ['list_files'] }] };
  assert.throws(
    () => loadConfig({ DEEPQ_CONFIG: file('approvals.json', JSON.stringify(typo)) }),
    (e: Error) => {
      assert.ok(e instanceof ConfigError);
      assert.match(e.message, /roles\.0: Unrecognized key: "approvals"/);
      return true;
    },
  );
  const full = { name: 'tester', systemPrompt: 'You test.', tool: ['read_file'] };
  const roles = [...loadConfig({}).roles, full];
  assert.throws(() => loadConfig({ DEEPQ_CONFIG: file('tool.json', JSON.stringify({ roles })) }), /"tool"/);
  const planner = { planner: { maxturns: 2 } };
  assert.throws(
    () => loadConfig({ DEEPQ_CONFIG: file('planner.json', JSON.stringify(planner)) }),
    /planner: .*"maxturns"/,
  );
});

test('stall cycles are at most the 10 the progress record keeps (more could never be seen)', () => {
  assert.equal(loadConfig({ DEEPQ_STALL_CYCLES: '10' }).stall.cycles, 10);
  assert.throws(() => loadConfig({ DEEPQ_STALL_CYCLES: '12' }), /stall\.cycles \(DEEPQ_STALL_CYCLES\): Too big/);
});

test('a middleware list without tier-routing or tokens is refused, naming the role', () => {
  // Without tokens a role's calls ignored the goal's budgets and booked no usage; without
  // tier-routing every call failed at run time asking for a model named "LOW".
  for (const middleware of [
    ['logging', 'tier-routing', 'retry'],
    ['tokens', 'retry'],
  ]) {
    const roles = loadConfig({}).roles.map((r) => (r.name === 'critic' ? { ...r, middleware } : r));
    assert.throws(
      () => loadConfig({ DEEPQ_CONFIG: file('middleware.json', JSON.stringify({ roles })) }),
      (e: Error) => {
        assert.ok(e instanceof ConfigError);
        assert.match(e.message, /roles\.2\.middleware: must list tier-routing and tokens/);
        return true;
      },
    );
  }
  const planner = { planner: { middleware: ['tier-routing'] } };
  assert.throws(
    () => loadConfig({ DEEPQ_CONFIG: file('planner-mw.json', JSON.stringify(planner)) }),
    /planner\.middleware: must list/,
  );
  const lean = loadConfig({}).roles.map((r) => ({ ...r, middleware: ['tier-routing', 'tokens'] }));
  assert.equal(loadConfig({ DEEPQ_CONFIG: file('lean.json', JSON.stringify({ roles: lean })) }).roles.length, 3);
});

test("the reflector's or planner's section changes only the fields it sets, not their tier or contract", () => {
  const c = loadConfig({ DEEPQ_CONFIG: file('coord.json', JSON.stringify({ reflector: { maxTokens: 2000 } })) });
  const r = reflectorSpec(c);
  assert.deepEqual([r.tier, r.contract, r.maxTurns, r.maxTokens], ['LOW', 'reflection', 1, 2000]);
  const p = plannerSpec(loadConfig({ DEEPQ_CONFIG: file('plan.json', JSON.stringify({ planner: { tier: 'LOW' } })) }));
  assert.deepEqual([p.tier, p.contract, p.maxTurns], ['LOW', 'plan', 1]);
});

test('a role is a config entry: a fourth role needs no code', () => {
  const roles = [
    ...loadConfig({}).roles,
    {
      name: 'tester',
      systemPrompt: 'You write tests. Return ONLY code in one fenced block.',
      contract: 'code',
      tools: ['read_file'],
      tier: 'LOW',
    },
  ];
  const c = loadConfig({ DEEPQ_CONFIG: file('roles.json', JSON.stringify({ roles })) });
  assert.equal(c.roles[3]!.name, 'tester');
  assert.equal(c.roles[3]!.maxTurns, 30);
  assert.throws(
    () => loadConfig({ DEEPQ_CONFIG: file('dup.json', JSON.stringify({ roles: [...roles, roles[0]] })) }),
    /role names must be unique/,
  );
  assert.throws(
    () =>
      loadConfig({
        DEEPQ_CONFIG: file(
          'nine.json',
          JSON.stringify({ roles: Array.from({ length: 9 }, (_, i) => ({ name: `r${i}`, systemPrompt: 'x' })) }),
        ),
      }),
    /3 to 8 roles/,
  );
});

test('a price without cache prices charges cached tokens at its input price, not $0', () => {
  const p = file('prices.json', JSON.stringify({ prices: { 'local:m': { inputPerMTok: 2.5, outputPerMTok: 10 } } }));
  const price = loadConfig({ DEEPQ_CONFIG: p }).prices['local:m'];
  assert.deepEqual(price, { inputPerMTok: 2.5, outputPerMTok: 10, cacheReadPerMTok: 2.5, cacheWritePerMTok: 2.5 });
  const set = file(
    'p2.json',
    JSON.stringify({ prices: { m: { inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3 } } }),
  );
  assert.deepEqual(loadConfig({ DEEPQ_CONFIG: set }).prices.m, {
    inputPerMTok: 3,
    outputPerMTok: 15,
    cacheReadPerMTok: 0.3,
    cacheWritePerMTok: 3,
  });
});

test("the inspector's trace link is an http(s) URL with {traceId} in it", () => {
  const url = 'http://jaeger:16686/trace/{traceId}';
  assert.equal(loadConfig({ DEEPQ_TRACE_URL: url }).traceUrl, url);
  assert.equal(loadConfig({}).traceUrl, undefined);
  assert.throws(
    () => loadConfig({ DEEPQ_TRACE_URL: 'http://jaeger:16686/search' }),
    /traceUrl .*must contain \{traceId\}/,
  );
  assert.throws(() => loadConfig({ DEEPQ_TRACE_URL: 'javascript:alert(1)//{traceId}' }), /traceUrl .*http\(s\) URL/);
  assert.throws(() => loadConfig({ DEEPQ_TRACE_URL: 'http://a b/{traceId}' }), /traceUrl .*http\(s\) URL/);
});

test('a DEEPQ_* variable deepq does not read is named, with the nearest setting; known ones are not', () => {
  const cfg = loadConfig({ DEEPQ_MAX_TOKEN: '5000', DEEPQ_CONCURRENCY: '2', DEEPQ_WHATEVER: '1' });
  assert.equal(
    cfg.envNotice,
    'deepq: ignoring DEEPQ_MAX_TOKEN (did you mean DEEPQ_MAX_TOKENS?), DEEPQ_WHATEVER: not a deepq setting ' +
      "(the README's Configuration lists them)",
  );
  assert.equal(loadConfig({ DEEPQ_MAX_TOKENS: '5000', DEEPQ_DEBUG: '1' }).envNotice, undefined);
});

test('a DEEPQ_* variable the config file names (a provider key) is not taken for a misspelling', () => {
  const dir = tempDir('deepq-cfg-');
  const file = join(dir, 'deepq.json');
  const providers = { local: { type: 'openai', baseURL: 'http://127.0.0.1:1/v1', apiKeyEnv: 'DEEPQ_LOCAL_KEY' } };
  writeFileSync(file, JSON.stringify({ providers }));
  const cfg = loadConfig({ DEEPQ_CONFIG: file, DEEPQ_LOCAL_KEY: 'k', DEEPQ_LOCAL_KY: 'k' });
  assert.match(cfg.envNotice ?? '', /^deepq: ignoring DEEPQ_LOCAL_KY: not a deepq setting/);
});

test('every DEEPQ_* name in the code, deployments and docs is one deepq knows', () => {
  const names = new Set<string>();
  const walk = (path: string) => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const full = join(path, entry.name);
      if (entry.isDirectory()) walk(full);
      else for (const m of readFileSync(full, 'utf8').matchAll(/\bDEEPQ_[A-Z0-9_]*[A-Z0-9]\b/g)) names.add(m[0]);
    }
  };
  const root = new URL('../../', import.meta.url).pathname;
  for (const dir of ['shared', 'services', 'cli', 'bin', 'bench', 'testing', 'k8s', 'deploy', 'docs', 'scripts'])
    walk(join(root, dir));
  for (const file of ['README.md', 'docker-compose.yml', 'Dockerfile'])
    for (const m of readFileSync(join(root, file), 'utf8').matchAll(/\bDEEPQ_[A-Z0-9_]*[A-Z0-9]\b/g)) names.add(m[0]);
  assert.ok(names.size > 50, `found ${names.size}`);
  const env = Object.fromEntries([...names].map((n) => [n, '1']));
  assert.equal(unknownEnvNotice(env, CONFIG_ENV_NAMES, ''), undefined);
});

test("every config variable is in the README's Configuration table (the misspelling notice points there)", () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf('\n## Configuration');
  const table = readme.slice(start, readme.indexOf('\n\n', readme.indexOf('\n| ', start)));
  const listed = new Set([...table.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]));
  assert.deepEqual(
    CONFIG_ENV_NAMES.filter((name) => !listed.has(name)),
    [],
  );
});
