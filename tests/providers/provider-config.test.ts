// Providers as config: `providers` names endpoints, tiers and roles name `<provider>:<model>`
// (split at the first colon), a bare id means the predefined anthropic, and configs and
// variables from before providers existed keep their meaning. Mistakes stop the process at
// start naming the field.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { createProvider } from '../../shared/agent/providers/index.ts';
import { parseModelRef } from '../../shared/agent/providers/model-ref.ts';
import { DEFAULT_ROLES, RoleSpecSchema } from '../../shared/agent/roles.ts';
import { ConfigError } from '../../shared/errors.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { secretsOf } from '../../shared/runtime/runtime.ts';
import { tempDir } from '../../testing/temp-dir.ts';

function configFile(content: Record<string, unknown>): string {
  const file = join(tempDir('deepq-providers-'), 'deepq.json');
  writeFileSync(file, JSON.stringify(content));
  return file;
}

const LOCAL = { type: 'openai', baseURL: 'http://127.0.0.1:11434/v1', apiKeyEnv: 'LOCAL_API_KEY' };
const withCritic = (model: string) => DEFAULT_ROLES.map((r) => (r.name === 'critic' ? { ...r, model } : r));

test('model refs split at the first colon; a bare id is anthropic', () => {
  assert.deepEqual(parseModelRef('local:qwen3:8b'), { provider: 'local', model: 'qwen3:8b' });
  assert.deepEqual(parseModelRef('claude-sonnet-5-5'), { provider: 'anthropic', model: 'claude-sonnet-5-5' });
  assert.deepEqual(parseModelRef('anthropic:a.b-v1:0'), { provider: 'anthropic', model: 'a.b-v1:0' });
});

test('the issue’s config loads: LOW on a local server, HIGH on anthropic, the critic’s own model', () => {
  const file = configFile({
    providers: { local: LOCAL },
    models: { HIGH: 'anthropic:claude-sonnet-5-5', LOW: 'local:qwen3:8b' },
    roles: withCritic('local:qwen3:8b'),
  });
  const cfg = loadConfig({ DEEPQ_CONFIG: file, ANTHROPIC_API_KEY: 'sk-ant-x', LOCAL_API_KEY: 'sk-local-secret' });
  assert.equal(cfg.modelProvider, 'anthropic');
  assert.deepEqual(cfg.models, { HIGH: 'anthropic:claude-sonnet-5-5', LOW: 'local:qwen3:8b' });
  assert.equal(cfg.roles.find((r) => r.name === 'critic')!.model, 'local:qwen3:8b');
  assert.equal(cfg.providers.local!.type, 'openai');
  assert.equal(cfg.providers.local!.maxRetries, 0, "deepq's retry middleware owns retries");
  assert.deepEqual(cfg.providerEnv, { LOCAL_API_KEY: 'sk-local-secret' });
  assert.ok(secretsOf(cfg).includes('sk-local-secret'), 'the key is scrubbed from logs like the Anthropic one');
  assert.equal(createProvider(cfg).name, 'anthropic,local');
});

/** The issue's config as written: a `roles` entry without systemPrompt overrides that default role. */
const ISSUE_YAML = `providers:
  local: { type: openai, baseURL: "http://localhost:11434/v1", apiKeyEnv: LOCAL_API_KEY }
models: { HIGH: "anthropic:claude-sonnet-5-5", LOW: "local:qwen3:8b" }
roles:
  - name: critic
    model: "local:qwen3:8b"      # a role-level override of its tier
`;

function yamlFile(text: string): string {
  const file = join(tempDir('deepq-providers-'), 'deepq.yaml');
  writeFileSync(file, text);
  return file;
}

const defaultRole = (name: string) => RoleSpecSchema.parse(DEFAULT_ROLES.find((r) => r.name === name));

test('the issue’s YAML loads as written: the critic overridden, the other default roles intact', () => {
  const env = { DEEPQ_CONFIG: yamlFile(ISSUE_YAML), ANTHROPIC_API_KEY: 'k', LOCAL_API_KEY: 'sk-local' };
  const cfg = loadConfig(env);
  assert.deepEqual(cfg.roles.map((r) => r.name).sort(), ['code-writer', 'critic', 'research-specialist']);
  const critic = cfg.roles.find((r) => r.name === 'critic')!;
  assert.deepEqual(critic, { ...defaultRole('critic'), model: 'local:qwen3:8b' }, 'its other fields are the default’s');
  for (const name of ['research-specialist', 'code-writer'])
    assert.deepEqual(
      cfg.roles.find((r) => r.name === name),
      defaultRole(name),
    );
  assert.equal(createProvider(cfg).name, 'anthropic,local');
});

test('overrides in a full role list; an override naming no default role is an error naming it', () => {
  const tester = { name: 'tester', systemPrompt: 'You test.', tools: ['read_file'] };
  const full = { roles: [tester, { name: 'code-writer', tier: 'LOW' }, DEFAULT_ROLES[2]] };
  const cfg = loadConfig({ DEEPQ_CONFIG: configFile(full), ANTHROPIC_API_KEY: 'k' });
  // A list with a full entry is the whole set, as before: research-specialist is not in it.
  assert.deepEqual(
    cfg.roles.map((r) => r.name),
    ['tester', 'code-writer', 'critic'],
  );
  assert.deepEqual(cfg.roles[1], { ...defaultRole('code-writer'), tier: 'LOW' });
  const cases: [string, RegExp][] = [
    [
      'roles:\n  - name: critc\n    model: x\n',
      /roles\.0\.name: role "critc" has no systemPrompt and is not a default/,
    ],
    ['roles:\n  - { name: tester, systemPrompt: t }\n  - { name: helper, tier: LOW }\n', /roles\.1\.name: .*"helper"/],
    ['roles:\n  - { name: critic, tools: [nope] }\n', /roles\.0\.tools\.0: unknown tool "nope"/],
    ['roles:\n  - { name: critic }\n  - { name: critic, tier: HIGH }\n', /roles: role names must be unique/],
  ];
  for (const [text, message] of cases)
    assert.throws(
      () => loadConfig({ DEEPQ_CONFIG: yamlFile(text), ANTHROPIC_API_KEY: 'k' }),
      (err: Error) => err instanceof ConfigError && message.test(err.message),
      String(message),
    );
});

test('configs and variables from before providers keep working, defaults unchanged', () => {
  const cfg = loadConfig({ ANTHROPIC_API_KEY: 'sk-ant-x', DEEPQ_MODEL_HIGH: 'big-1', DEEPQ_MODEL_LOW: 'small-1' });
  assert.deepEqual(cfg.models, { HIGH: 'big-1', LOW: 'small-1' });
  assert.deepEqual(cfg.providers, {});
  assert.equal(createProvider(cfg).name, 'anthropic');
  assert.deepEqual(loadConfig({ ANTHROPIC_API_KEY: 'k' }).models, {
    HIGH: 'claude-sonnet-5-5',
    LOW: 'claude-haiku-5-5',
  });
  // No key: the scripted model, booked under its own ids, however the file routes models.
  const file = configFile({ providers: { local: LOCAL }, roles: withCritic('local:qwen3:8b') });
  const scripted = loadConfig({ DEEPQ_CONFIG: file });
  assert.equal(scripted.modelProvider, 'scripted');
  assert.deepEqual(scripted.models, { HIGH: 'scripted-high', LOW: 'scripted-low' });
  assert.equal(scripted.roles.find((r) => r.name === 'critic')!.model, undefined);
  assert.equal(createProvider(scripted).name, 'scripted');
  // DEEPQ_MODEL_HIGH may name a provider too.
  const env = { DEEPQ_CONFIG: file, DEEPQ_MODEL_PROVIDER: 'anthropic', ANTHROPIC_API_KEY: 'k' };
  assert.equal(loadConfig({ ...env, DEEPQ_MODEL_HIGH: 'local:big' }).models.HIGH, 'local:big');
});

test('every model on a configured provider: no Anthropic key needed, real providers by default', () => {
  const file = configFile({ providers: { local: LOCAL }, models: { HIGH: 'local:big', LOW: 'local:small' } });
  const cfg = loadConfig({ DEEPQ_CONFIG: file, LOCAL_API_KEY: 'k' });
  assert.equal(cfg.modelProvider, 'anthropic');
  assert.match(cfg.providerNotice!, /no model is on anthropic: using the configured providers/);
  assert.equal(createProvider(cfg).name, 'local');
  // One anthropic model left: the key is needed again.
  const mixed = configFile({ providers: { local: LOCAL }, models: { HIGH: 'claude-x', LOW: 'local:small' } });
  assert.throws(
    () => createProvider(loadConfig({ DEEPQ_CONFIG: mixed, DEEPQ_MODEL_PROVIDER: 'anthropic', LOCAL_API_KEY: 'k' })),
    /ANTHROPIC_API_KEY\) is required/,
  );
});

test('mistakes stop the process at start, naming the field', () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ models: { HIGH: 'local:x', LOW: 'y' } }, /models\.HIGH: "local:x" names provider "local", which is not config/],
    [{ models: { HIGH: 'qwen3:8b', LOW: 'y' } }, /models\.HIGH: .*provider "qwen3".*written anthropic:<id>/],
    [{ roles: withCritic('nowhere:m') }, /roles\.2\.model: "nowhere:m" names provider "nowhere"/],
    [{ reflector: { model: 'local:' }, providers: { local: LOCAL } }, /reflector\.model: "local:" names no model/],
    [{ providers: { anthropic: LOCAL } }, /providers\.anthropic: anthropic is predefined/],
    [{ providers: { local: { ...LOCAL, type: 'grpc' } } }, /providers\.local\.type/],
    [{ providers: { local: { ...LOCAL, baseURL: 'not a url' } } }, /providers\.local\.baseURL/],
    [{ providers: { local: { ...LOCAL, apiKey: 'sk-in-the-file' } } }, /providers\.local.*apiKey/],
    [{ providers: { Local: LOCAL } }, /provider names/],
  ];
  for (const [content, message] of cases) {
    const env = { DEEPQ_CONFIG: configFile(content), ANTHROPIC_API_KEY: 'k' };
    assert.throws(
      () => loadConfig(env),
      (err: Error) => err instanceof ConfigError && message.test(err.message),
      String(message),
    );
  }
});

test('a provider whose key variable is unset stops the process that would call it, naming both', () => {
  const file = configFile({
    providers: { local: { ...LOCAL, headers: { 'X-Team': { env: 'TEAM_TOKEN' }, 'X-Plain': 'yes' } } },
    models: { HIGH: 'local:big', LOW: 'local:small' },
  });
  // The CLI loads this config fine (it calls no model) ...
  const cfg = loadConfig({ DEEPQ_CONFIG: file, TEAM_TOKEN: 't' });
  // ... a service does not start without the key.
  assert.throws(
    () => createProvider(cfg),
    (err: Error) =>
      err instanceof ConfigError &&
      /providers\.local\.apiKeyEnv: environment variable LOCAL_API_KEY is not set \(provider "local" needs it\)/.test(
        err.message,
      ),
  );
  const noHeader = loadConfig({ DEEPQ_CONFIG: file, LOCAL_API_KEY: 'k' });
  assert.throws(() => createProvider(noHeader), /providers\.local\.headers\.X-Team: environment variable TEAM_TOKEN/);
  assert.equal(createProvider(loadConfig({ DEEPQ_CONFIG: file, LOCAL_API_KEY: 'k', TEAM_TOKEN: 't' })).name, 'local');
});
