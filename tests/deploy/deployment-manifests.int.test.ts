// Offline checks of the deployment files: Dockerfile, docker-compose.yml, the Prometheus and
// Grafana provisioning, and the Kubernetes manifests (raw, and built with `kubectl
// kustomize` when kubectl is on PATH). No Docker engine, no cluster, no Redis.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  accessSync,
  constants,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, delimiter, dirname, join, posix, relative } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import YAML from 'yaml';
import { WORK_MARGIN_BYTES } from '../../shared/agent/sandbox/command.ts';
import { SandboxSchema } from '../../shared/agent/sandbox/config.ts';
import { CONFIG_ENV_VARS, ConfigSchema, loadConfig } from '../../shared/runtime/config.ts';
import { Metrics } from '../../shared/runtime/metrics.ts';
import { subagentQueueName } from '../../shared/runtime/queues.ts';

// Manifests are untyped YAML; `any` keeps the walking code short.
// biome-ignore lint/suspicious/noExplicitAny: manifests are untyped YAML walked by shape.
type Obj = Record<string, any>;

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = join(ROOT, 'bin', 'deepq.mjs');
const run = promisify(execFile);
const rel = (p: string) => relative(ROOT, p) || '.';
const readText = (p: string) => readFileSync(join(ROOT, p), 'utf8');

const DRAIN_DEFAULT_MS = ConfigSchema.parse({}).drainTimeoutMs;
const DEEPQ_COMMANDS = new Set(['planner', 'reflector', 'worker', 'ui']);
const REQUIRED_DASHBOARD_METRICS = [
  'deepq_queue_jobs',
  'deepq_jobs_total',
  'deepq_job_duration_seconds',
  'deepq_llm_requests_total',
  'deepq_llm_latency_seconds',
  'deepq_llm_tokens_total',
  'deepq_goals_total',
  'deepq_reflection_decisions_total',
  'deepq_vfs_bytes',
  'deepq_vfs_evictions_total',
  'deepq_sandbox_runs_total',
  'deepq_sandbox_seconds',
  'deepq_approvals_pending',
  'deepq_approvals_total',
  'deepq_goal_cycles',
  'deepq_stalls_total',
  'deepq_budget_events_total',
  'deepq_redis_up',
  'deepq_redis_full_total',
  'deepq_tool_calls_total',
  'deepq_tool_latency_seconds',
  'deepq_reconciled_total',
];
// Gauges every process (or every reflector) reads from the same Redis: summing the series
// would count one figure once per replica.
const SAME_IN_EVERY_PROCESS = ['deepq_approvals_pending', 'deepq_vfs_bytes'];
// Set in both compose and k8s: without them a containerised fleet does not work.
const MUST_SET_EVERYWHERE = [
  'REDIS_URL',
  'DEEPQ_CONFIG',
  'DEEPQ_PREFIX',
  'DEEPQ_BLOB_DIR',
  'METRICS_PORT',
  // deepq binds 127.0.0.1 by default; probes and Prometheus reach a container from outside.
  'METRICS_HOST',
  'DEEPQ_DRAIN_TIMEOUT_MS',
];
const WILDCARD_HOSTS = ['0.0.0.0', '::'];

// ---------------------------------------------------------------------------------------
// Helpers

function walk(dir: string, pred: (f: string) => boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p, pred));
    else if (pred(p)) out.push(p);
  }
  return out;
}

/** Every YAML document of a file, each checked for parse errors. */
function parseYamlDocs(text: string, where: string): Obj[] {
  const docs = YAML.parseAllDocuments(text, { merge: true });
  const out: Obj[] = [];
  for (const d of docs) {
    assert.deepEqual(
      d.errors.map((e) => e.message),
      [],
      `${where}: YAML errors`,
    );
    const js = d.toJS();
    if (js !== null && js !== undefined) out.push(js);
  }
  return out;
}
function parseYamlFile(path: string): Obj[] {
  return parseYamlDocs(readFileSync(path, 'utf8'), rel(path));
}

/** docker compose's variable interpolation, with the given (here: empty) environment. */
function interpolate(s: string, env: Record<string, string> = {}): string {
  return s.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}/g,
    (_m, name: string, op?: string, arg?: string) => {
      const v = env[name];
      if (op === ':-') return v ? v : (arg ?? '');
      if (op === '-') return v !== undefined ? v : (arg ?? '');
      if (op === ':?' || op === '?') {
        if (v === undefined || (op === ':?' && v === '')) throw new Error(`compose requires ${name}: ${arg}`);
        return v;
      }
      return v ?? '';
    },
  );
}
function deepInterpolate<T>(v: T): T {
  if (typeof v === 'string') return interpolate(v) as T;
  if (Array.isArray(v)) return v.map(deepInterpolate) as T;
  if (v && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, deepInterpolate(x)])) as T;
  return v;
}

/** "40s", "1m30s", "500ms", "2m" → seconds. */
function durationSeconds(d: string | number): number {
  if (typeof d === 'number') return d;
  let total = 0;
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s|us)/g;
  let matched = '';
  for (let m = re.exec(d); m; m = re.exec(d)) {
    matched += m[0];
    const n = Number(m[1]);
    total += m[2] === 'h' ? n * 3600 : m[2] === 'm' ? n * 60 : m[2] === 's' ? n : m[2] === 'ms' ? n / 1000 : n / 1e6;
  }
  assert.equal(matched, d, `cannot parse duration ${JSON.stringify(d)}`);
  return total;
}

function envList(env: unknown): Record<string, string> {
  if (!env) return {};
  if (Array.isArray(env)) {
    return Object.fromEntries(
      env.map((e: string) => {
        const i = e.indexOf('=');
        return i < 0 ? [e, ''] : [e.slice(0, i), e.slice(i + 1)];
      }),
    );
  }
  return Object.fromEntries(
    Object.entries(env as Obj).map(([k, v]) => [k, v === null || v === undefined ? '' : String(v)]),
  );
}

function onPath(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, cmd);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

function redisPassword(url: string): string {
  return decodeURIComponent(new URL(url).password);
}

/** Names of the environment variables the deepq code reads. */
function varsTheCodeReads(): Set<string> {
  const names = new Set<string>(CONFIG_ENV_VARS);
  const files = ['bin', 'cli', 'services', 'shared'].flatMap((d) =>
    walk(join(ROOT, d), (f) => /\.(ts|mjs|js)$/.test(f)),
  );
  for (const f of files) {
    for (const m of readFileSync(f, 'utf8').matchAll(
      /process\.env(?:\.([A-Z][A-Z0-9_]*)|\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\])/g,
    )) {
      names.add((m[1] ?? m[2])!);
    }
  }
  return names;
}
const KNOWN_VARS = varsTheCodeReads();

/** The variable table of deploy/ENV.md: name → {compose, k8s} columns. */
function envDoc(): Map<string, { defaultValue: string; compose: string; k8s: string }> {
  const text = readText('deploy/ENV.md');
  const start = text.indexOf('## Variables deepq reads');
  assert.ok(start >= 0, 'deploy/ENV.md needs a "## Variables deepq reads" section');
  const rest = text.slice(start + 1);
  const end = rest.indexOf('\n## ');
  const section = end < 0 ? rest : rest.slice(0, end);
  const rows = new Map<string, { defaultValue: string; compose: string; k8s: string }>();
  for (const line of section.split('\n')) {
    const m = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|(.*)\|\s*$/.exec(line);
    if (!m) continue;
    const cells = m[2]!.split('|').map((c) => c.trim());
    assert.equal(cells.length, 4, `deploy/ENV.md row ${m[1]}: expected Variable | Default | Meaning | compose | k8s`);
    assert.ok(!rows.has(m[1]!), `deploy/ENV.md lists ${m[1]} twice`);
    rows.set(m[1]!, { defaultValue: cells[0]!, compose: cells[2]!, k8s: cells[3]! });
  }
  return rows;
}

/** Runs `deepq <args> --help` and returns the help text (exit 0 required). */
async function deepqHelp(args: string[]): Promise<string> {
  // A bare environment: --help must not need Redis or config, and never reaches any Redis.
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir() };
  try {
    const { stdout } = await run(process.execPath, [BIN, ...args, '--help'], { cwd: ROOT, env, timeout: 20_000 });
    return stdout;
  } catch (err) {
    const e = err as Error & { code?: number; stdout?: string; stderr?: string };
    assert.fail(`deepq ${args.join(' ')} --help exited ${e.code}: ${e.stderr ?? e.message}`);
  }
}

/** Checks a service command against the real CLI: the subcommand exists and every option
 * in the args is one it lists. */
async function assertRealCommand(args: string[], where: string): Promise<void> {
  assert.ok(args.length > 0, `${where}: empty command`);
  assert.ok(
    DEEPQ_COMMANDS.has(args[0]!),
    `${where}: ${JSON.stringify(args)} is not a deepq service command (${[...DEEPQ_COMMANDS].join(', ')})`,
  );
  // `deepq <args> --help` parses the args up to --help and prints the subcommand's help.
  const help = await deepqHelp(args);
  assert.match(help, new RegExp(`Usage: deepq ${args[0]} `), `${where}: deepq ${args.join(' ')} --help`);
  for (const a of args.slice(1)) {
    if (!a.startsWith('-')) continue;
    const flag = a.split('=')[0]!;
    assert.ok(
      new RegExp(`(^|[\\s,])${flag.replace(/[-]/g, '\\-')}([\\s,]|$)`, 'm').test(help),
      `${where}: option ${flag} is not an option of deepq ${args[0]}:\n${help}`,
    );
  }
}

function workerRole(args: string[]): string | undefined {
  if (args[0] !== 'worker') return undefined;
  const i = args.findIndex((a) => a === '--role' || a.startsWith('--role='));
  assert.ok(i >= 0, `worker command without --role: ${JSON.stringify(args)}`);
  return args[i]!.includes('=') ? args[i]!.split('=')[1] : args[i + 1];
}

function rolesOfConfigText(text: string, where: string): string[] {
  const parsed = ConfigSchema.safeParse(YAML.parse(text) ?? {});
  assert.ok(parsed.success, `${where}: not a valid deepq config: ${parsed.success ? '' : parsed.error.message}`);
  return parsed.data.roles.map((r) => r.name);
}

/** Loads the config the way a container would (env + the mounted config file). */
function assertConfigLoads(env: Record<string, string>, configText: string, where: string): void {
  const dir = mkdtempSync(join(tmpdir(), 'deepq-manifest-'));
  try {
    const file = join(dir, basename(env.DEEPQ_CONFIG ?? 'deepq.yaml'));
    writeFileSync(file, configText);
    const cfg = loadConfig({ ...env, DEEPQ_CONFIG: file });
    assert.equal(cfg.metricsPort, 9464, `${where}: METRICS_PORT`);
  } catch (err) {
    assert.fail(`${where}: the container's config does not load: ${(err as Error).message}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------
// Compose

const COMPOSE_PATH = join(ROOT, 'docker-compose.yml');
function loadCompose(): Obj {
  const docs = parseYamlFile(COMPOSE_PATH);
  assert.equal(docs.length, 1, 'docker-compose.yml: one document');
  return deepInterpolate(docs[0]!);
}
function deepqComposeServices(compose: Obj): [string, Obj][] {
  return Object.entries(compose.services as Obj).filter(([, s]) => s.build !== undefined);
}
function composeCommand(s: Obj): string[] {
  const c = s.command;
  if (Array.isArray(c)) return c.map(String);
  assert.equal(typeof c, 'string', 'compose command');
  return (c as string).trim().split(/\s+/);
}
function composeMounts(s: Obj): { source: string; target: string; type: 'bind' | 'volume' }[] {
  return (s.volumes ?? []).map((v: string | Obj) => {
    if (typeof v === 'object')
      return { source: v.source, target: v.target, type: v.type === 'bind' ? 'bind' : 'volume' };
    const [source, target] = v.split(':');
    return { source: source!, target: target!, type: /^[./~]/.test(source!) ? 'bind' : 'volume' };
  });
}

/** A service's tmpfs mounts: `path[:opts]`. Docker mounts them noexec unless `exec` is given. */
function composeTmpfs(s: Obj): { path: string; exec: boolean }[] {
  const list = typeof s.tmpfs === 'string' ? [s.tmpfs] : ((s.tmpfs ?? []) as string[]);
  return list.map((t) => {
    const [path, opts = ''] = t.split(':');
    const o = opts.split(',');
    return { path: path!, exec: o.lastIndexOf('exec') > o.lastIndexOf('noexec') };
  });
}

/** `dir` is `mount` or below it. */
function isUnder(dir: string, mount: string): boolean {
  return dir === mount || dir.startsWith(mount.endsWith('/') ? mount : `${mount}/`);
}

// ---------------------------------------------------------------------------------------
// Kubernetes

const K8S = join(ROOT, 'k8s');
const BASE = join(K8S, 'base');

/** The raw base: its resources, plus ConfigMaps/Secrets emulating its generators. */
function rawBase(): Obj[] {
  const kust = parseYamlFile(join(BASE, 'kustomization.yaml'))[0]!;
  const objs: Obj[] = [];
  for (const r of kust.resources as string[]) objs.push(...parseYamlFile(join(BASE, r)));
  for (const g of (kust.configMapGenerator ?? []) as Obj[]) {
    const data: Record<string, string> = {};
    for (const f of (g.files ?? []) as string[]) {
      const [key, path] = f.includes('=') ? f.split('=') : [basename(f), f];
      data[key!] = readFileSync(join(BASE, path!), 'utf8');
    }
    for (const l of (g.literals ?? []) as string[]) {
      const i = l.indexOf('=');
      data[l.slice(0, i)] = l.slice(i + 1);
    }
    objs.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: g.name }, data });
  }
  return objs;
}

function byKind(objs: Obj[], kind: string): Obj[] {
  return objs.filter((o) => o.kind === kind);
}
function find(objs: Obj[], kind: string, name: string): Obj | undefined {
  return objs.find((o) => o.kind === kind && o.metadata?.name === name);
}
function secretData(secret: Obj): Record<string, string> {
  const out: Record<string, string> = { ...(secret.stringData ?? {}) };
  for (const [k, v] of Object.entries((secret.data ?? {}) as Record<string, string>))
    out[k] ??= Buffer.from(v, 'base64').toString('utf8');
  return out;
}
function matches(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/** A container's environment as the kubelet builds it (envFrom, then env). */
function containerEnv(objs: Obj[], c: Obj, where: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const ef of (c.envFrom ?? []) as Obj[]) {
    if (ef.configMapRef) {
      const cm = find(objs, 'ConfigMap', ef.configMapRef.name);
      assert.ok(cm || ef.configMapRef.optional, `${where}: envFrom ConfigMap ${ef.configMapRef.name} not found`);
      Object.assign(env, cm?.data ?? {});
    }
    if (ef.secretRef) {
      const s = find(objs, 'Secret', ef.secretRef.name);
      assert.ok(s || ef.secretRef.optional, `${where}: envFrom Secret ${ef.secretRef.name} not found`);
      if (s) Object.assign(env, secretData(s));
    }
  }
  for (const e of (c.env ?? []) as Obj[]) {
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (e.valueFrom?.secretKeyRef) {
      const ref = e.valueFrom.secretKeyRef;
      const s = find(objs, 'Secret', ref.name);
      const v = s ? secretData(s)[ref.key] : undefined;
      assert.ok(
        v !== undefined || ref.optional,
        `${where}: ${e.name} refers to missing secret key ${ref.name}/${ref.key}`,
      );
      if (v !== undefined) env[e.name] = v;
    } else if (e.valueFrom?.configMapKeyRef) {
      const ref = e.valueFrom.configMapKeyRef;
      const v = find(objs, 'ConfigMap', ref.name)?.data?.[ref.key];
      assert.ok(
        v !== undefined || ref.optional,
        `${where}: ${e.name} refers to missing ConfigMap key ${ref.name}/${ref.key}`,
      );
      if (v !== undefined) env[e.name] = v;
    } else {
      env[e.name] = '';
    }
  }
  return env;
}

/** A Kubernetes memory quantity ("1Gi", "768Mi", "1G") in bytes. */
function toBytes(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi|K|M|G)?$/.exec(q);
  assert.ok(m, `memory quantity ${q}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ''] ?? 1;
  return Number(m[1]) * unit;
}
/** A redis.conf memory size ("512mb" = 512 MiB, "512m" = 512 MB) in bytes. */
function redisBytes(v: string): number {
  const m = /^(\d+)(kb|mb|gb|k|m|g)?$/i.exec(v);
  assert.ok(m, `Redis memory size ${v}`);
  const units: Record<string, number> = { kb: 2 ** 10, mb: 2 ** 20, gb: 2 ** 30, k: 1e3, m: 1e6, g: 1e9 };
  return Number(m[1]) * (units[(m[2] ?? '').toLowerCase()] ?? 1);
}

/** The keys a container gets from Secrets through envFrom. */
function envFromSecretKeys(objs: Obj[], c: Obj): Set<string> {
  const keys = new Set<string>();
  for (const ef of (c.envFrom ?? []) as Obj[]) {
    const secret = ef.secretRef && find(objs, 'Secret', ef.secretRef.name);
    if (secret) for (const k of Object.keys(secretData(secret))) keys.add(k);
  }
  return keys;
}

function probePort(c: Obj, probe: Obj): number {
  const p = probe.httpGet.port;
  if (typeof p === 'number') return p;
  if (/^\d+$/.test(p)) return Number(p);
  const named = (c.ports ?? []).find((x: Obj) => x.name === p);
  assert.ok(named, `probe port ${p} is not a named container port`);
  return named.containerPort;
}

interface DeepqPod {
  deployment: Obj;
  name: string;
  args: string[];
  env: Record<string, string>;
  configText: string;
  image: string;
}

/** The states a KEDA trigger's query sums, sorted: "prioritized|waiting". */
function triggerStates(t: Obj): string {
  const states = /state=~"([^"]+)"/.exec(t.metadata.query)?.[1]?.split('|') ?? [];
  return [...states].sort().join('|');
}

/** A role's ScaledObject scales on its backlog (the interface) and on its demand: the backlog
 * alone reads 0 while every replica is busy and nothing waits, and KEDA scaled them away. */
function checkScaledObjectTriggers(triggers: Obj[], role: string, where: string): void {
  for (const t of triggers) {
    assert.equal(t.type, 'prometheus', `${where}: KEDA prometheus scaler`);
    assert.match(t.metadata.serverAddress, /^https?:\/\//, `${where}: serverAddress`);
    assert.ok(Number(t.metadata.threshold) > 0, `${where}: threshold`);
    // No series means deepq is not scraped (the reflector reports every queue), never no work.
    assert.equal(t.metadata.ignoreNullValues, 'false', `${where}: an empty answer is an error, not 0`);
    const q = t.metadata.query as string;
    assert.match(q, /\bdeepq_queue_jobs\{/, `${where}: queries deepq_queue_jobs`);
    assert.ok(
      q.includes(`queue="${subagentQueueName(role)}"`),
      `${where}: query is on queue ${subagentQueueName(role)}: ${q}`,
    );
    // The reflector reports every queue and workers their own: avoid counting a queue twice.
    assert.ok(
      /\bmax\s+by\s*\(\s*queue\s*,\s*state\s*\)|\bmax\s*\(|service="/.test(q),
      `${where}: query must de-duplicate reporters (max by (queue, state) or a service filter): ${q}`,
    );
  }
  const backlog = triggers.find((t) => triggerStates(t) === 'prioritized|waiting');
  assert.ok(backlog, `${where}: a trigger on the backlog = waiting + prioritized`);
  const demand = triggers.find((t) => triggerStates(t) === 'active|prioritized|waiting');
  assert.ok(demand, `${where}: a trigger on the demand (active + waiting + prioritized): busy replicas must stay`);
  assert.equal(demand.metadata.threshold, backlog.metadata.threshold, `${where}: one per-replica target`);
  assert.equal(
    new Set(triggers.map((t) => t.metadata.serverAddress)).size,
    1,
    `${where}: every trigger asks the same Prometheus`,
  );
}

/** Structural checks of a set of Kubernetes objects (raw base or kustomize output). */
function checkCluster(objs: Obj[], label: string): { pods: DeepqPod[]; roles: string[] } {
  for (const o of objs) {
    assert.ok(
      o.apiVersion && o.kind && o.metadata?.name,
      `${label}: every object has apiVersion, kind and metadata.name (${JSON.stringify(o).slice(0, 120)})`,
    );
  }
  const deployments = byKind(objs, 'Deployment');
  assert.ok(deployments.length >= 5, `${label}: planner, reflector and a worker per role`);
  const pods: DeepqPod[] = [];
  for (const d of deployments) {
    const name = d.metadata.name as string;
    const where = `${label} Deployment ${name}`;
    const spec = d.spec.template.spec as Obj;
    const podLabels = d.spec.template.metadata.labels as Record<string, string>;
    assert.ok(matches(d.spec.selector.matchLabels, podLabels), `${where}: selector matches the pod labels`);
    assert.equal(spec.containers.length, 1, `${where}: one container`);
    const c = spec.containers[0] as Obj;
    // The image's ENTRYPOINT (an init, then deepq) runs deepq; args pick the service.
    if (c.command !== undefined)
      assert.deepEqual(c.command, imageEntrypoint(), `${where}: command must keep the image's entrypoint`);
    const args = (c.args ?? []).map(String) as string[];
    const env = containerEnv(objs, c, where);
    // A Secret's keys (envFrom) are the operator's: REDIS_PASSWORD feeds the Redis StatefulSet too.
    const passedThrough = envFromSecretKeys(objs, c);
    for (const k of Object.keys(env))
      assert.ok(KNOWN_VARS.has(k) || passedThrough.has(k), `${where}: sets ${k}, which deepq does not read`);
    for (const k of MUST_SET_EVERYWHERE) assert.ok(env[k], `${where}: ${k} must be set`);

    // Metrics port, probes, scrape annotations.
    const port = Number(env.METRICS_PORT);
    assert.ok(port > 0, `${where}: METRICS_PORT`);
    assert.ok(WILDCARD_HOSTS.includes(env.METRICS_HOST!), `${where}: METRICS_HOST=${env.METRICS_HOST}, not 0.0.0.0`);
    assert.ok(
      (c.ports ?? []).some((p: Obj) => p.containerPort === port),
      `${where}: containerPort ${port}`,
    );
    assert.equal(c.livenessProbe?.httpGet?.path, '/healthz', `${where}: liveness /healthz`);
    assert.equal(c.readinessProbe?.httpGet?.path, '/readyz', `${where}: readiness /readyz`);
    assert.equal(probePort(c, c.livenessProbe), port, `${where}: liveness port`);
    assert.equal(probePort(c, c.readinessProbe), port, `${where}: readiness port`);
    if (c.startupProbe) {
      assert.ok(['/healthz', '/readyz'].includes(c.startupProbe.httpGet?.path), `${where}: startup probe path`);
      assert.equal(probePort(c, c.startupProbe), port, `${where}: startup port`);
    }
    const ann = (d.spec.template.metadata.annotations ?? {}) as Record<string, string>;
    assert.equal(ann['prometheus.io/scrape'], 'true', `${where}: prometheus.io/scrape`);
    assert.equal(Number(ann['prometheus.io/port']), port, `${where}: prometheus.io/port`);
    assert.equal(ann['prometheus.io/path'] ?? '/metrics', '/metrics', `${where}: prometheus.io/path`);

    // Shutdown, resources, security.
    const drainMs = Number(env.DEEPQ_DRAIN_TIMEOUT_MS || DRAIN_DEFAULT_MS);
    assert.ok(
      spec.terminationGracePeriodSeconds > drainMs / 1000,
      `${where}: terminationGracePeriodSeconds ${spec.terminationGracePeriodSeconds} ` +
        `must exceed the drain timeout ${drainMs} ms`,
    );
    for (const k of ['requests', 'limits'])
      for (const r of ['cpu', 'memory']) assert.ok(c.resources?.[k]?.[r], `${where}: resources.${k}.${r}`);
    const sc = { ...(spec.securityContext ?? {}), ...(c.securityContext ?? {}) };
    assert.equal(sc.runAsNonRoot, true, `${where}: runAsNonRoot`);
    assert.ok(sc.runAsUser === undefined || sc.runAsUser !== 0, `${where}: non-root user`);
    assert.equal(c.securityContext?.allowPrivilegeEscalation, false, `${where}: allowPrivilegeEscalation false`);

    // Volumes: the config file and the shared blob directory.
    const volumes = new Map<string, Obj>(((spec.volumes ?? []) as Obj[]).map((v) => [v.name, v]));
    const mountAt = (path: string) => (c.volumeMounts ?? []).find((m: Obj) => m.mountPath === path);
    const blobMount = mountAt(env.DEEPQ_BLOB_DIR!);
    assert.ok(blobMount, `${where}: DEEPQ_BLOB_DIR ${env.DEEPQ_BLOB_DIR} is mounted`);
    // Writable everywhere: workers spill contents, and the inspector spills an upload > DEEPQ_SPILL_BYTES.
    assert.notEqual(blobMount.readOnly, true, `${where}: the blob dir is writable (uploads and spills write it)`);
    const claim = volumes.get(blobMount.name)?.persistentVolumeClaim?.claimName;
    const pvc = claim && find(objs, 'PersistentVolumeClaim', claim);
    assert.ok(pvc, `${where}: the blob dir is a PersistentVolumeClaim`);
    assert.ok(
      pvc.spec.accessModes.includes('ReadWriteMany'),
      `${where}: PVC ${claim} is ReadWriteMany (shared by every pod)`,
    );
    const cfgMount = mountAt(posix.dirname(env.DEEPQ_CONFIG!));
    assert.ok(cfgMount, `${where}: DEEPQ_CONFIG ${env.DEEPQ_CONFIG} is in a mounted directory`);
    const cmName = volumes.get(cfgMount.name)?.configMap?.name;
    const configText = cmName && find(objs, 'ConfigMap', cmName)?.data?.[posix.basename(env.DEEPQ_CONFIG!)];
    assert.equal(typeof configText, 'string', `${where}: DEEPQ_CONFIG comes from a ConfigMap key`);
    const readOnlyRoot = c.securityContext?.readOnlyRootFilesystem === true;
    if (readOnlyRoot) assert.ok(mountAt('/tmp'), `${where}: a read-only root needs a writable /tmp`);

    // Every Deployment has a PodDisruptionBudget.
    const pdbs = byKind(objs, 'PodDisruptionBudget').filter((p) => matches(p.spec.selector.matchLabels, podLabels));
    assert.equal(pdbs.length, 1, `${where}: exactly one PodDisruptionBudget`);

    pods.push({ deployment: d, name, args, env, configText, image: c.image });
  }

  assert.equal(new Set(pods.map((p) => p.image)).size, 1, `${label}: one image for every service`);
  const configs = new Set(pods.map((p) => p.configText));
  assert.equal(configs.size, 1, `${label}: every service reads the same config`);
  const roles = rolesOfConfigText([...configs][0]!, `${label} ConfigMap config`);
  // The shipped Secret's key is a placeholder, refused at start: load as the operator's pods do.
  for (const p of pods) {
    const env = p.env.ANTHROPIC_API_KEY ? { ...p.env, ANTHROPIC_API_KEY: 'sk-ant-operator-key' } : p.env;
    assertConfigLoads(env, p.configText, `${label} Deployment ${p.name}`);
  }

  // Planner and reflector, once each; one worker Deployment per role, and nothing else.
  const cmds = pods.map((p) => p.args[0]);
  assert.equal(cmds.filter((c) => c === 'planner').length, 1, `${label}: one planner Deployment`);
  assert.equal(cmds.filter((c) => c === 'reflector').length, 1, `${label}: one reflector Deployment`);
  const workers = pods.filter((p) => p.args[0] === 'worker');
  const workerRoles = workers.map((p) => workerRole(p.args)!);
  assert.deepEqual(
    [...workerRoles].sort(),
    [...roles].sort(),
    `${label}: worker Deployments match the roles in the ConfigMap one-to-one`,
  );

  // One KEDA ScaledObject per role worker, scaling on that role's backlog.
  const scaled = byKind(objs, 'ScaledObject');
  const scaledRoles: string[] = [];
  for (const so of scaled) {
    const where = `${label} ScaledObject ${so.metadata.name}`;
    const target = workers.find((w) => w.name === so.spec.scaleTargetRef.name);
    assert.ok(target, `${where}: scaleTargetRef ${so.spec.scaleTargetRef.name} is a worker Deployment`);
    assert.ok(
      !so.spec.scaleTargetRef.kind || so.spec.scaleTargetRef.kind === 'Deployment',
      `${where}: targets a Deployment`,
    );
    const role = workerRole(target.args)!;
    scaledRoles.push(role);
    assert.equal(
      target.deployment.spec.replicas,
      undefined,
      `${where}: the Deployment leaves replicas to the autoscaler`,
    );
    assert.ok(so.spec.maxReplicaCount >= (so.spec.minReplicaCount ?? 0), `${where}: min <= max`);
    assert.ok(so.spec.fallback?.replicas >= 1, `${where}: a fallback replica count while the query fails`);
    checkScaledObjectTriggers(so.spec.triggers as Obj[], role, where);
  }
  assert.deepEqual([...scaledRoles].sort(), [...roles].sort(), `${label}: ScaledObjects match the roles one-to-one`);

  // Redis: persistence, noeviction, a password that matches REDIS_URL, a Service.
  const redis = byKind(objs, 'StatefulSet').find((s) => s.metadata.name === 'redis');
  assert.ok(redis, `${label}: Redis StatefulSet`);
  const rc = redis.spec.template.spec.containers[0] as Obj;
  const rargs = [...(rc.command ?? []), ...(rc.args ?? [])].map(String);
  const argAfter = (flag: string) => rargs[rargs.indexOf(flag) + 1];
  assert.equal(argAfter('--appendonly'), 'yes', `${label}: Redis AOF on`);
  assert.equal(argAfter('--maxmemory-policy'), 'noeviction', `${label}: Redis noeviction`);
  // Persistence forks: the child's copy-on-write pages share the container's limit with maxmemory.
  const limitBytes = toBytes(rc.resources.limits.memory);
  assert.ok(
    redisBytes(argAfter('--maxmemory')!) <= 0.6 * limitBytes,
    `${label}: Redis --maxmemory ${argAfter('--maxmemory')} over 60 % of its ${rc.resources.limits.memory} limit`,
  );
  assert.ok(rargs.includes('--requirepass'), `${label}: Redis password`);
  assert.ok(redis.spec.volumeClaimTemplates?.length, `${label}: Redis persistence (volumeClaimTemplates)`);
  const renv = containerEnv(objs, rc, `${label} StatefulSet redis`);
  const pass = argAfter('--requirepass')!.replace(/\$\(([A-Z_][A-Z0-9_]*)\)/g, (_m, n: string) => renv[n] ?? '');
  assert.ok(pass.length > 0, `${label}: Redis password resolves`);
  const redisPodLabels = redis.spec.template.metadata.labels as Record<string, string>;
  for (const p of pods) {
    const url = new URL(p.env.REDIS_URL!);
    assert.equal(redisPassword(p.env.REDIS_URL!), pass, `${label} ${p.name}: REDIS_URL carries the Redis password`);
    const svc = find(objs, 'Service', url.hostname.split('.')[0]!);
    assert.ok(
      svc && matches(svc.spec.selector, redisPodLabels),
      `${label} ${p.name}: REDIS_URL host ${url.hostname} is the Redis Service`,
    );
    assert.ok(
      svc.spec.ports.some((x: Obj) => x.port === Number(url.port || 6379)),
      `${label}: Redis Service port`,
    );
  }
  assert.ok(
    byKind(objs, 'Namespace').some((n) => n.metadata.name === 'deepq'),
    `${label}: namespace deepq`,
  );
  return { pods, roles };
}

/** A kustomize env file: NAME=value lines, # comments. */
function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    if (!line.trim() || line.trimStart().startsWith('#')) continue;
    const i = line.indexOf('=');
    out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

const OPERATOR_SECRETS = {
  ANTHROPIC_API_KEY: 'sk-ant-operator-key',
  REDIS_PASSWORD: 'operatorPassw0rd',
  REDIS_URL: 'redis://:operatorPassw0rd@redis:6379',
};

/** A copy of k8s/ whose example overlay has the operator's secrets.env; returns its k8s dir. */
function withOperatorSecrets(): string {
  const copy = join(mkdtempSync(join(tmpdir(), 'deepq-k8s-')), 'k8s');
  cpSync(K8S, copy, { recursive: true });
  const lines = Object.entries(OPERATOR_SECRETS).map(([k, v]) => `${k}=${v}`);
  writeFileSync(join(copy, 'overlays/example/secrets.env'), `${lines.join('\n')}\n`);
  return copy;
}

// ---------------------------------------------------------------------------------------
// Tests

describe('deployment files parse', () => {
  test('docker-compose.yml, Prometheus, Grafana and every Kubernetes manifest parse', () => {
    assert.ok(Object.keys(loadCompose().services).length >= 8);
    const prom = parseYamlFile(join(ROOT, 'deploy/prometheus/prometheus.yml'));
    assert.ok(prom[0]!.scrape_configs.length > 0);
    for (const f of walk(join(ROOT, 'deploy/grafana/provisioning'), (p) => /\.ya?ml$/.test(p)))
      assert.equal(parseYamlFile(f).length, 1, rel(f));
    for (const f of walk(join(ROOT, 'deploy/grafana/dashboards'), (p) => p.endsWith('.json')))
      JSON.parse(readFileSync(f, 'utf8'));

    const files = walk(K8S, (p) => /\.ya?ml$/.test(p));
    assert.ok(files.length >= 12, 'k8s manifests');
    const kustomizations = new Set<string>();
    for (const f of files) {
      const docs = parseYamlFile(f);
      assert.ok(docs.length > 0, `${rel(f)}: empty`);
      const name = basename(f);
      if (name === 'kustomization.yaml') {
        assert.equal(docs[0]!.kind, 'Kustomization', rel(f));
        kustomizations.add(dirname(f));
        continue;
      }
      if (name === 'kustomizeconfig.yaml' || name === 'deepq.yaml') continue; // not objects
      for (const d of docs)
        assert.ok(d.apiVersion && d.kind && d.metadata?.name, `${rel(f)}: apiVersion, kind, metadata.name`);
    }
    assert.ok(
      kustomizations.has(BASE) && kustomizations.has(join(K8S, 'overlays/example')),
      'base and overlays/example kustomizations',
    );

    // Every base file is used by the base kustomization; k8s/extras by none.
    const kust = parseYamlFile(join(BASE, 'kustomization.yaml'))[0]!;
    const used = new Set<string>([
      'kustomization.yaml',
      ...(kust.resources as string[]),
      ...((kust.configurations ?? []) as string[]),
      ...((kust.configMapGenerator ?? []) as Obj[]).flatMap((g) =>
        ((g.files ?? []) as string[]).map((x) => x.split('=').pop()!),
      ),
    ]);
    for (const f of readdirSync(BASE).filter((x) => /\.ya?ml$/.test(x)))
      assert.ok(used.has(f), `k8s/base/${f} is not referenced by k8s/base/kustomization.yaml`);
    for (const dir of kustomizations) {
      const text = readFileSync(join(dir, 'kustomization.yaml'), 'utf8');
      assert.doesNotMatch(text, /extras/, `${rel(dir)}/kustomization.yaml must not include k8s/extras`);
    }
    const hpa = parseYamlFile(join(K8S, 'extras/hpa-example.yaml'));
    assert.ok(
      hpa.length > 0 && hpa.every((h) => h.kind === 'HorizontalPodAutoscaler' && h.spec.metrics.length > 0),
      'hpa-example.yaml holds HPAs',
    );
  });
});

describe('Dockerfile', () => {
  test('multi-stage, production deps only, non-root, one image whose entrypoint is deepq', () => {
    const df = readText('Dockerfile');
    const lines = df.split('\n').filter((l) => !/^\s*#/.test(l));
    const text = lines.join('\n');
    assert.ok((text.match(/^FROM\s/gm) ?? []).length >= 2, 'multi-stage build');
    assert.match(text, /npm ci\b[^\n]*--omit=dev/, 'npm ci --omit=dev');
    assert.match(text, /^FROM\s+node:(\$\{NODE_VERSION\}|22|24)-(slim|alpine)/m, 'a slim or alpine Node runtime');
    // Node 20 reached end of life in April 2026: the image ships a supported LTS.
    const version = /^ARG\s+NODE_VERSION=(\d+)/m.exec(text)?.[1];
    if (/\$\{NODE_VERSION\}/.test(text)) assert.ok(['22', '24'].includes(version ?? ''), `NODE_VERSION=${version}`);
    const users = [...text.matchAll(/^USER\s+(\S+)/gm)].map((m) => m[1]!);
    assert.ok(users.length > 0, 'USER set');
    const last = users[users.length - 1]!;
    assert.ok(!/^(root|0)(:|$)/.test(last), `runs as non-root (USER ${last})`);
    assert.deepEqual(imageEntrypoint().slice(-2), ['node', 'bin/deepq.mjs'], 'the entrypoint runs deepq');
    assert.match(text, /METRICS_PORT=9464/, 'METRICS_PORT=9464 in the image');
    const ignore = readText('.dockerignore')
      .split('\n')
      .map((l) => l.trim());
    assert.ok(
      ignore.includes('node_modules') && ignore.includes('.git'),
      '.dockerignore excludes node_modules and .git',
    );
    for (const dir of ['bin', 'cli', 'services', 'shared', 'scripts'])
      assert.ok(!ignore.includes(dir), `.dockerignore must keep ${dir}`);
    // A local dist/ (perhaps stale) never reaches the image: the build stage makes its own.
    assert.ok(ignore.includes('dist'), '.dockerignore excludes dist');
  });

  test('the image runs the compiled output: built in a build stage, no sources or tsx at run time', () => {
    const stages = dockerStages(readText('Dockerfile'));
    const runtime = stages[stages.length - 1]!;
    const build = stages.find((s) => /^RUN\s+npm run build\s*$/m.test(s.body));
    assert.ok(build, 'a stage runs npm run build');
    for (const src of ['bin', 'cli', 'services', 'shared', 'scripts/build.mjs', 'tsconfig.build.json'])
      assert.match(build.body, new RegExp(`^COPY\\s+[^\\n]*\\b${src}\\b`, 'm'), `the build stage copies ${src}`);
    assert.match(
      runtime.body,
      new RegExp(`^COPY\\s+--from=${build.name}\\s+/app/dist\\s+\\./dist\\s*$`, 'm'),
      'the runtime stage copies dist/ from the build stage',
    );
    assert.match(runtime.body, /^COPY\s+bin\s/m, 'the runtime stage has bin/deepq.mjs, the entrypoint');
    // bin/deepq.mjs falls back to tsx only where cli/main.ts exists: without the sources it runs dist/.
    for (const src of ['cli', 'services', 'shared', 'tsconfig'])
      assert.doesNotMatch(
        runtime.body,
        new RegExp(`^COPY\\s+(?!--from)[^\\n]*\\b${src}`, 'm'),
        `runtime copies ${src}`,
      );
    assert.doesNotMatch(runtime.body, /\b(tsx|typescript|npm (ci|install))\b/, 'the runtime stage installs nothing');
    const deps = stages.find((s) => runtime.body.includes(`--from=${s.name} /app/node_modules`));
    assert.ok(deps && /npm ci\b[^\n]*--omit=dev/.test(deps.body), 'node_modules: production dependencies only');
    // The root `prepare` script builds, which needs the sources: no `npm ci` may run it before they are there.
    for (const m of readText('Dockerfile').matchAll(/npm ci\b[^\n]*/g))
      assert.match(m[0], /--ignore-scripts/, `${m[0]}: without --ignore-scripts it runs prepare (the build)`);
    const pkg = JSON.parse(readText('package.json'));
    assert.ok(pkg.devDependencies.typescript && !pkg.dependencies.typescript, 'TypeScript is a dev dependency');
    assert.equal(pkg.scripts.prepare, 'node scripts/build.mjs --if-possible', 'npm ci builds, and never fails for it');
  });
});

describe('Dockerfile: an init is PID 1', () => {
  // What a killed sandbox run (bwrap) or an MCP server leaves behind is re-parented to PID 1;
  // node never reaps it, so as PID 1 each stays a zombie and counts against later runs' nproc.
  const INITS = ['tini', 'dumb-init'];
  const ZOMBIE_SCRIPT = `
    import { spawn } from 'node:child_process';
    import { readdirSync, readFileSync } from 'node:fs';
    const state = (p) => { try { const s = readFileSync('/proc/' + p + '/stat', 'utf8');
      return s.slice(s.lastIndexOf(')') + 2)[0]; } catch { return ''; } };
    const zombies = () => readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p) && state(p) === 'Z').length;
    const sh = 'for i in 1 2 3 4 5; do sh -c "sleep 0.2" & done; echo forked; sleep 30';
    const c = spawn('sh', ['-c', sh], { stdio: ['ignore', 'pipe', 'ignore'] });
    c.stdout.once('data', () => {
      c.kill('SIGKILL');
      // Then out at once: the orphaned sleep still holds the pipe, which would keep node up 30 s.
      setTimeout(() => {
        console.log(JSON.stringify({ pid: process.pid, zombies: zombies() }));
        process.exit(0);
      }, 2000);
    });`;

  /** The init part of the entrypoint: everything before `node`. */
  function initOf(entry: string[]): string[] {
    const node = entry.indexOf('node');
    assert.ok(node >= 0, `the entrypoint runs node: ${JSON.stringify(entry)}`);
    return entry.slice(0, node);
  }

  test('the ENTRYPOINT runs deepq under an init the runtime stage installs; nothing overrides it', () => {
    const entry = imageEntrypoint();
    const init = initOf(entry);
    assert.ok(init.length > 0, `node must not be PID 1: ENTRYPOINT ${JSON.stringify(entry)}`);
    const initName = posix.basename(init[0]!);
    assert.ok(INITS.includes(initName), `${init[0]} is not an init (${INITS.join(', ')})`);
    assert.equal(init[init.length - 1], '--', 'the init stops parsing options before node');
    const stages = dockerStages(readText('Dockerfile'));
    // One line per instruction: the continuation lines of a RUN joined.
    const runtime = stages[stages.length - 1]!.body.replace(/\\\n/g, ' ');
    assert.match(runtime, new RegExp(`^RUN .*apt-get install .*\\b${initName}\\b`, 'm'), `installs ${initName}`);
    for (const [name, s] of deepqComposeServices(loadCompose()))
      assert.equal(s.entrypoint, undefined, `compose ${name}: an entrypoint override drops the init`);
  });

  test('under that init, orphans of killed children are reaped (tini and unshare on PATH, as root)', async (t) => {
    const init = initOf(imageEntrypoint());
    assert.ok(init.length > 0, 'node is PID 1: no init to reap orphans');
    const unshare = onPath('unshare');
    const initBin = onPath(posix.basename(init[0]!));
    if (!unshare || !initBin || process.getuid?.() !== 0) {
      t.skip('needs unshare, the init and root (a PID namespace)');
      return;
    }
    const inNamespace = async (cmd: string[]) => {
      const { stdout } = await run(unshare, ['--pid', '--fork', '--mount-proc', ...cmd], { timeout: 20_000 });
      return JSON.parse(stdout.trim().split('\n').pop()!) as { pid: number; zombies: number };
    };
    const script = [process.execPath, '--input-type=module', '-e', ZOMBIE_SCRIPT];
    // The control: node as PID 1 keeps them (so the check can see zombies at all).
    let bare: { pid: number; zombies: number };
    try {
      bare = await inNamespace(script);
    } catch (err) {
      if (!/Operation not permitted/.test(String((err as { stderr?: string }).stderr))) throw err;
      t.skip('no PID namespaces here');
      return;
    }
    assert.deepEqual(bare, { pid: 1, zombies: 5 }, 'node as PID 1 leaves the orphans as zombies');
    const underInit = await inNamespace([initBin, ...init.slice(1), ...script]);
    assert.equal(underInit.zombies, 0, `zombies under ${init.join(' ')}`);
  });
});

/** The runtime image's ENV settings (`ENV K=V [K=V ...]`, continuation lines joined). */
function imageEnv(): Record<string, string> {
  const stages = dockerStages(readText('Dockerfile'));
  const body = stages[stages.length - 1]!.body.replace(/\\\n/g, ' ');
  const env: Record<string, string> = {};
  for (const m of body.matchAll(/^ENV\s+(.*)$/gm))
    for (const kv of m[1]!.trim().split(/\s+/)) {
      const i = kv.indexOf('=');
      assert.ok(i > 0, `Dockerfile: ENV ${kv} is not K=V`);
      env[kv.slice(0, i)] = kv.slice(i + 1);
    }
  return env;
}

/** The runtime image's ENTRYPOINT (exec form). */
function imageEntrypoint(): string[] {
  const stages = dockerStages(readText('Dockerfile'));
  const entry = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(stages[stages.length - 1]!.body);
  assert.ok(entry, 'the runtime stage has an ENTRYPOINT in exec form');
  return JSON.parse(entry[1]!) as string[];
}

/** The stages of a Dockerfile: name (AS …, else the index) and the lines up to the next FROM. */
function dockerStages(df: string): { name: string; body: string }[] {
  const lines = df.split('\n').filter((l) => !/^\s*#/.test(l));
  const stages: { name: string; body: string }[] = [];
  for (const line of lines) {
    const from = /^FROM\s+\S+(?:\s+AS\s+(\S+))?/i.exec(line);
    if (from) stages.push({ name: from[1] ?? String(stages.length), body: '' });
    else if (stages.length) stages[stages.length - 1]!.body += `${line}\n`;
  }
  return stages;
}

describe('HOME in the containers', () => {
  // README's MCP example starts a stdio server with `npx`, which writes its cache to $HOME/.npm
  // and runs the package from there: HOME must be writable, and on a mount that allows exec.
  test('the image sets HOME on the writable scratch mount of every compose service and k8s pod', () => {
    const home = imageEnv().HOME;
    assert.ok(home, "the image sets HOME (the base image's /home/node is on the read-only root)");
    for (const [name, s] of deepqComposeServices(loadCompose())) {
      assert.equal(envList(s.environment).HOME, undefined, `compose ${name}: HOME is the image's`);
      if (!s.read_only) continue;
      const tmpfs = composeTmpfs(s).find((m) => isUnder(home, m.path));
      assert.ok(tmpfs, `compose ${name}: HOME ${home} is on no tmpfs, and the root is read-only`);
      assert.ok(tmpfs.exec, `compose ${name}: the tmpfs ${tmpfs.path} is noexec (npx runs what it fetched)`);
    }
    const base = rawBase();
    for (const d of byKind(base, 'Deployment')) {
      const where = `k8s Deployment ${d.metadata.name}`;
      const c = d.spec.template.spec.containers[0] as Obj;
      assert.equal(containerEnv(base, c, where).HOME, undefined, `${where}: HOME is the image's`);
      if (c.securityContext?.readOnlyRootFilesystem !== true) continue;
      const mount = ((c.volumeMounts ?? []) as Obj[]).find((m) => isUnder(home, m.mountPath));
      assert.ok(mount && !mount.readOnly, `${where}: HOME ${home} is on no writable volume`);
      const volume = (d.spec.template.spec.volumes as Obj[]).find((v) => v.name === mount.name);
      assert.ok(volume?.emptyDir, `${where}: HOME's volume ${mount.name} is an emptyDir`);
    }
  });
});

describe('docker-compose.yml', () => {
  test('Redis: AOF, noeviction, a password that REDIS_URL carries', () => {
    const compose = loadCompose();
    const redis = compose.services.redis as Obj;
    const args = composeCommand(redis);
    const after = (f: string) => args[args.indexOf(f) + 1];
    assert.equal(args[0], 'redis-server');
    assert.equal(after('--appendonly'), 'yes');
    assert.equal(after('--maxmemory-policy'), 'noeviction');
    const pass = after('--requirepass');
    assert.ok(pass, 'a password');
    assert.ok(
      composeMounts(redis).some((m) => m.target === '/data' && m.type === 'volume'),
      'Redis data on a named volume',
    );
    for (const [name, s] of deepqComposeServices(compose)) {
      assert.equal(
        redisPassword(envList(s.environment).REDIS_URL!),
        pass,
        `${name}: REDIS_URL carries the Redis password`,
      );
      assert.equal(new URL(envList(s.environment).REDIS_URL!).hostname, 'redis', `${name}: REDIS_URL host`);
      assert.equal(s.depends_on?.redis?.condition, 'service_healthy', `${name}: waits for a healthy Redis`);
    }
  });

  test('deepq services: env, healthcheck on /healthz, drain-safe stop, shared blob volume, scalable workers', () => {
    const compose = loadCompose();
    const services = deepqComposeServices(compose);
    const others = Object.keys(compose.services)
      .filter((n) => !services.some(([s]) => s === n))
      .sort();
    assert.deepEqual(others, ['grafana', 'prometheus', 'redis']);
    const images = new Set<string>();
    for (const [name, s] of services) {
      const env = envList(s.environment);
      images.add(s.image);
      for (const k of Object.keys(env)) assert.ok(KNOWN_VARS.has(k), `${name}: sets ${k}, which deepq does not read`);
      for (const k of MUST_SET_EVERYWHERE) assert.ok(env[k], `${name}: ${k} must be set`);
      assert.equal(env.METRICS_PORT, '9464', `${name}: METRICS_PORT`);
      assert.ok(WILDCARD_HOSTS.includes(env.METRICS_HOST!), `${name}: METRICS_HOST=${env.METRICS_HOST}, not 0.0.0.0`);
      const hc = (
        Array.isArray(s.healthcheck?.test) ? s.healthcheck.test.join(' ') : String(s.healthcheck?.test ?? '')
      ) as string;
      assert.ok(
        hc.includes(`:${env.METRICS_PORT}/healthz`),
        `${name}: healthcheck hits /healthz on METRICS_PORT: ${hc}`,
      );
      const drainMs = Number(env.DEEPQ_DRAIN_TIMEOUT_MS || DRAIN_DEFAULT_MS);
      assert.ok(
        durationSeconds(s.stop_grace_period ?? '10s') > drainMs / 1000,
        `${name}: stop_grace_period above the drain timeout`,
      );
      const mounts = composeMounts(s);
      const blob = mounts.find((m) => m.target === env.DEEPQ_BLOB_DIR);
      assert.ok(
        blob && blob.type === 'volume' && blob.source in (compose.volumes ?? {}),
        `${name}: DEEPQ_BLOB_DIR on a shared named volume`,
      );
      const cfg = mounts.find((m) => m.target === env.DEEPQ_CONFIG);
      assert.ok(
        cfg && cfg.type === 'bind' && existsSync(join(ROOT, cfg.source)),
        `${name}: DEEPQ_CONFIG is a mounted file of the repo`,
      );
      assertConfigLoads(env, readFileSync(join(ROOT, cfg.source), 'utf8'), `compose ${name}`);
      if (s.read_only)
        assert.ok(
          composeTmpfs(s).some((m) => m.path === '/tmp'),
          `${name}: read-only root needs a /tmp tmpfs`,
        );
      if (name.startsWith('worker-')) {
        assert.equal(s.container_name, undefined, `${name}: no container_name (it must scale)`);
        assert.equal(s.ports, undefined, `${name}: no host ports (it must scale)`);
      }
    }
    assert.equal(images.size, 1, 'one image for every deepq service');
    const blobSources = new Set(
      services.map(([, s]) => composeMounts(s).find((m) => m.target === envList(s.environment).DEEPQ_BLOB_DIR)!.source),
    );
    assert.equal(blobSources.size, 1, 'every service shares the same blob volume');
  });

  test('worker services match the roles of the config file one-to-one; planner and reflector once', async () => {
    const compose = loadCompose();
    const services = deepqComposeServices(compose);
    const cfgMount = composeMounts(services[0]![1]).find(
      (m) => m.target === envList(services[0]![1].environment).DEEPQ_CONFIG,
    )!;
    const roles = rolesOfConfigText(readFileSync(join(ROOT, cfgMount.source), 'utf8'), cfgMount.source);
    const byCommand = services.map(([name, s]) => ({ name, args: composeCommand(s) }));
    assert.deepEqual(
      byCommand.filter((c) => c.args[0] === 'planner').map((c) => c.name),
      ['planner'],
    );
    assert.deepEqual(
      byCommand.filter((c) => c.args[0] === 'reflector').map((c) => c.name),
      ['reflector'],
    );
    const workers = byCommand.filter((c) => c.args[0] === 'worker');
    for (const w of workers) assert.equal(w.name, `worker-${workerRole(w.args)}`, `${w.name}: named worker-<role>`);
    assert.deepEqual(workers.map((w) => workerRole(w.args)).sort(), [...roles].sort());
  });

  test('Prometheus scrapes every deepq service (and its replicas) on METRICS_PORT; Grafana is provisioned', () => {
    const compose = loadCompose();
    const services = deepqComposeServices(compose);
    const prom = compose.services.prometheus as Obj;
    const promMount = composeMounts(prom).find((m) => m.type === 'bind' && m.source.endsWith('prometheus.yml'));
    assert.ok(promMount, 'prometheus.yml mounted');
    assert.ok(
      (prom.command ?? []).some((a: string) => a === `--config.file=${promMount.target}`),
      'Prometheus reads the mounted config',
    );
    const cfg = parseYamlFile(join(ROOT, promMount.source))[0]!;
    const job = (cfg.scrape_configs as Obj[]).find((j) => j.dns_sd_configs);
    assert.ok(job, 'a DNS service discovery job (replicas of a scaled service are all found)');
    const names = new Set<string>();
    for (const sd of job.dns_sd_configs as Obj[]) {
      assert.equal(sd.type, 'A');
      assert.equal(String(sd.port), '9464');
      for (const n of sd.names) names.add(n);
    }
    assert.deepEqual([...names].sort(), services.map(([n]) => n).sort(), 'every deepq compose service is scraped');
    for (const [, s] of services) assert.equal(envList(s.environment).METRICS_PORT, '9464');

    const grafana = compose.services.grafana as Obj;
    const gm = composeMounts(grafana);
    const prov = gm.find((m) => m.target === '/etc/grafana/provisioning');
    assert.ok(prov && existsSync(join(ROOT, prov.source)), 'Grafana provisioning mounted');
    const ds = parseYamlFile(join(ROOT, prov.source, 'datasources/prometheus.yml'))[0]!;
    assert.equal(new URL(ds.datasources[0].url).hostname, 'prometheus', 'datasource points at the prometheus service');
    const provider = parseYamlFile(join(ROOT, prov.source, 'dashboards/deepq.yml'))[0]!.providers[0];
    const dashMount = gm.find((m) => m.target === provider.options.path);
    assert.ok(
      dashMount && existsSync(join(ROOT, dashMount.source, 'deepq.json')),
      'the dashboard directory is mounted where the provider looks',
    );
  });
});

describe('Grafana dashboard', () => {
  test('covers the deepq metrics and only queries metrics that exist', async () => {
    const dash = JSON.parse(readText('deploy/grafana/dashboards/deepq.json'));
    assert.ok(dash.uid && dash.title, 'uid and title');
    const exprs: string[] = [];
    const visit = (panels: Obj[]) => {
      for (const p of panels) {
        if (p.panels) visit(p.panels);
        for (const t of p.targets ?? []) exprs.push(t.expr);
      }
    };
    visit(dash.panels);
    assert.ok(exprs.length >= 15, 'a real dashboard');
    const used = new Set(exprs.flatMap((e) => [...e.matchAll(/\b(deepq_[a-z0-9_]+)/g)].map((m) => m[1]!)));
    const metrics = new Metrics();
    const exists = new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name));
    const base = (n: string) => (exists.has(n) ? n : n.replace(/_(bucket|sum|count)$/, ''));
    for (const n of used) assert.ok(exists.has(base(n)), `dashboard queries ${n}, which deepq does not export`);
    for (const n of REQUIRED_DASHBOARD_METRICS)
      assert.ok(
        [...used].some((u) => base(u) === n),
        `dashboard shows ${n}`,
      );
    assert.ok(
      exprs.some((e) => /histogram_quantile\(.*deepq_job_duration_seconds_bucket/.test(e)),
      'job duration quantiles',
    );
    assert.ok(
      exprs.some((e) => /histogram_quantile\(.*deepq_llm_latency_seconds_bucket/.test(e)),
      'LLM latency quantiles',
    );
    assert.ok(
      exprs.some((e) => /histogram_quantile\(0\.95, .*deepq_sandbox_seconds_bucket/.test(e)),
      'sandbox run time p95',
    );
    for (const name of SAME_IN_EVERY_PROCESS)
      for (const e of exprs.filter((x) => x.includes(name)))
        assert.match(e, new RegExp(`^max(?: by \\([a-z_, ]+\\) )?\\(${name}\\)$`), `${name} is read with max: ${e}`);
    // The breakdowns operators read: each metric summed by these labels in some panel.
    const breakdowns: [string, string][] = [
      ['deepq_sandbox_runs_total', 'outcome'],
      ['deepq_approvals_total', 'decision'],
      ['deepq_goal_cycles_sum', 'status'],
      ['deepq_stalls_total', 'action'],
      ['deepq_budget_events_total', 'kind, action'],
    ];
    for (const [metric, labels] of breakdowns)
      assert.ok(
        exprs.some((e) => e.includes(`sum by (${labels}) (increase(${metric}`)),
        `${metric} by ${labels}`,
      );
  });
});

describe('Kubernetes manifests', () => {
  test(
    'the raw base: probes, ports, grace period, security, volumes, PDBs, ' + 'roles = Deployments = ScaledObjects',
    () => {
      checkCluster(rawBase(), 'k8s/base');
    },
  );

  test('the secret is an example: placeholders only', () => {
    const secret = find(rawBase(), 'Secret', 'deepq-secrets');
    assert.ok(secret, 'deepq-secrets');
    const data = secretData(secret);
    for (const k of ['ANTHROPIC_API_KEY', 'REDIS_URL']) assert.ok(data[k], `Secret has ${k}`);
    assert.doesNotMatch(data.ANTHROPIC_API_KEY!, /^sk-ant-[A-Za-z0-9_-]{20,}/, 'no real-looking API key');
  });

  // deploy/ENV.md: a provider's key or an MCP server's { env: NAME } value goes into deepq-secrets.
  test('a variable added to deepq-secrets reaches every pod that calls models or tools, never the ui', () => {
    const objs = rawBase();
    const secret = find(objs, 'Secret', 'deepq-secrets')!;
    secret.stringData = { ...secret.stringData, LOCAL_API_KEY: 'sk-local-1', SEARCH_MCP_AUTH: 'Bearer t' };
    for (const d of byKind(objs, 'Deployment')) {
      const where = `k8s Deployment ${d.metadata.name}`;
      const env = containerEnv(objs, d.spec.template.spec.containers[0], where);
      if (d.metadata.name === 'ui') {
        assert.equal(env.LOCAL_API_KEY, undefined, `${where}: the inspector gets no secret it does not need`);
        continue;
      }
      assert.equal(env.LOCAL_API_KEY, 'sk-local-1', `${where}: LOCAL_API_KEY from deepq-secrets`);
      assert.equal(env.SEARCH_MCP_AUTH, 'Bearer t', `${where}: SEARCH_MCP_AUTH from deepq-secrets`);
    }
  });

  // Applying the overlay must set the operator's values, every time: a placeholder Secret in
  // the applied build overwrote a Secret made by hand on each `kubectl apply -k`.
  test('the example overlay replaces the placeholder Secret with one from a git-ignored file', async () => {
    const overlayDir = join(K8S, 'overlays/example');
    const kust = parseYamlFile(join(overlayDir, 'kustomization.yaml'))[0]!;
    const gen = ((kust.secretGenerator ?? []) as Obj[]).find((g) => g.name === 'deepq-secrets');
    assert.ok(gen, 'overlays/example generates deepq-secrets (secretGenerator)');
    assert.equal(gen.behavior, 'replace', "it replaces the base's placeholder Secret");
    const sources = [...((gen.envs ?? []) as string[]), ...((gen.files ?? []) as string[])];
    assert.ok(sources.length > 0 && !gen.literals, 'its values come from files, not from kustomization.yaml');
    for (const f of sources) {
      const path = join(overlayDir, f.split('=').pop()!);
      await run('git', ['check-ignore', '-q', path], { cwd: ROOT }).catch(() =>
        assert.fail(`${rel(path)}: not ignored`),
      );
      const example = parseEnvFile(readFileSync(`${path}.example`, 'utf8'));
      const base = secretData(find(rawBase(), 'Secret', 'deepq-secrets')!);
      assert.deepEqual(Object.keys(example).sort(), Object.keys(base).sort(), `${rel(path)}.example: the keys`);
    }
    // The docs no longer have the operator make deepq-secrets by hand (the apply overwrote it).
    for (const doc of ['k8s/README.md', 'README.md']) {
      assert.doesNotMatch(readText(doc), /create secret generic deepq-secrets/, `${doc}: kubectl create deepq-secrets`);
      assert.match(readText(doc), /secrets\.env\.example/, `${doc}: says where the secrets go`);
    }
  });

  test('kubectl kustomize builds k8s/base and k8s/overlays/example', async (t) => {
    const kubectl = onPath('kubectl');
    if (!kubectl) {
      console.log('# skipped kubectl kustomize: kubectl is not on PATH');
      t.skip('kubectl is not on PATH');
      return;
    }
    const build = async (root: string, dir: string) => {
      const { stdout } = await run(kubectl, ['kustomize', join(root, dir)], {
        cwd: ROOT,
        timeout: 20_000,
        maxBuffer: 16 * 1024 * 1024,
      });
      return parseYamlDocs(stdout, `kubectl kustomize k8s/${dir}`);
    };
    // The overlay needs the operator's secrets.env (git-ignored): build a copy that has one.
    const copy = withOperatorSecrets();
    let base: Obj[];
    let overlay: Obj[];
    try {
      [base, overlay] = await Promise.all([build(K8S, 'base'), build(copy, 'overlays/example')]);
    } finally {
      rmSync(dirname(copy), { recursive: true, force: true });
    }
    const secrets = byKind(overlay, 'Secret').filter((x) => x.metadata.name === 'deepq-secrets');
    assert.equal(secrets.length, 1, 'the overlay builds one deepq-secrets');
    assert.deepEqual(
      secretData(secrets[0]!),
      OPERATOR_SECRETS,
      "the overlay's Secret holds secrets.env, no placeholder",
    );
    const b = checkCluster(base, 'kustomize k8s/base');
    const o = checkCluster(overlay, 'kustomize k8s/overlays/example');
    assert.deepEqual(o.roles, b.roles);
    for (const obj of [...base, ...overlay]) {
      if (obj.kind !== 'Namespace')
        assert.equal(obj.metadata.namespace, 'deepq', `${obj.kind} ${obj.metadata.name} in namespace deepq`);
    }
    assert.notEqual(o.pods[0]!.image, b.pods[0]!.image, 'the overlay sets the image');
  });
});

describe('autoscaling', () => {
  // Queue counts as the fleet reports them: the reflector and the role's workers each report
  // the role's queue (the queries must count it once), another queue is noise.
  const SCENARIOS = [
    { name: '3 replicas busy, nothing waits', active: 24, waiting: 0, prioritized: 0, replicas: 3 },
    { name: '3 replicas busy, 16 wait', active: 24, waiting: 10, prioritized: 6, replicas: 5 },
    { name: 'idle', active: 0, waiting: 0, prioritized: 0, replicas: 0 },
  ];

  /** The HPA's desired replicas under KEDA: the largest ceil(query / threshold) of the triggers. */
  function desiredReplicasExpr(triggers: Obj[]): string {
    const each = triggers.map(
      (t, i) => `label_replace(ceil((${t.metadata.query}) / ${Number(t.metadata.threshold)}), "t", "${i}", "", "")`,
    );
    return `max(${each.join(' or ')})`;
  }

  function scenarioTest(queue: string, role: string, expr: string, sc: (typeof SCENARIOS)[number]): Obj {
    const series = [];
    for (const service of ['reflector', `worker-${role}`])
      for (const state of ['active', 'waiting', 'prioritized'] as const)
        series.push({
          series: `deepq_queue_jobs{queue="${queue}",state="${state}",service="${service}"}`,
          values: `${sc[state]}x10`,
        });
    series.push({ series: 'deepq_queue_jobs{queue="plan",state="active",service="reflector"}', values: '99x10' });
    return {
      interval: '1m',
      name: `${role}: ${sc.name}`,
      input_series: series,
      promql_expr_test: [{ expr, eval_time: '5m', exp_samples: [{ labels: '{}', value: sc.replicas }] }],
    };
  }

  test('KEDA keeps the replicas that run jobs and gives a role one per 8 jobs it has (promtool)', async (t) => {
    const promtool = onPath('promtool');
    if (!promtool) {
      t.skip('promtool is not on PATH');
      return;
    }
    const tests: Obj[] = [];
    for (const so of byKind(rawBase(), 'ScaledObject')) {
      const role = String(so.spec.scaleTargetRef.name).replace(/^worker-/, '');
      const expr = desiredReplicasExpr(so.spec.triggers as Obj[]);
      for (const sc of SCENARIOS) tests.push(scenarioTest(subagentQueueName(role), role, expr, sc));
    }
    const dir = mkdtempSync(join(tmpdir(), 'deepq-keda-'));
    try {
      const file = join(dir, 'keda.test.yml');
      writeFileSync(file, YAML.stringify({ rule_files: [], evaluation_interval: '1m', tests }));
      const out = await run(promtool, ['test', 'rules', file], { timeout: 30_000 }).catch(
        (err: { stdout?: string; stderr?: string }) => ({ stdout: `${err.stdout ?? ''}${err.stderr ?? err}` }),
      );
      assert.match(out.stdout, /SUCCESS/, `the triggers' replica counts (exp = wanted, got = KEDA's):\n${out.stdout}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the HPA example scales each role on the same two metrics, both defined by its adapter rules', () => {
    const text = readFileSync(join(K8S, 'extras/hpa-example.yaml'), 'utf8');
    // The prometheus-adapter rules quoted in the header comment.
    const lines = text.split('\n');
    const from = lines.indexOf('#   externalRules:');
    assert.ok(from >= 0, 'the header quotes the adapter rules (externalRules:)');
    const block = lines.slice(from, lines.indexOf('#', from)).map((l) => l.slice(1));
    const rules = YAML.parse(block.join('\n')).externalRules as Obj[];
    const statesByMetric = new Map<string, string>(
      rules.map((r) => [r.name.as, triggerStates({ metadata: { query: r.metricsQuery } })]),
    );
    assert.equal(statesByMetric.get('deepq_queue_backlog'), 'prioritized|waiting');
    assert.equal(statesByMetric.get('deepq_queue_demand'), 'active|prioritized|waiting');
    const roles = byKind(rawBase(), 'ScaledObject').map((so) => so.spec.scaleTargetRef.name as string);
    const hpas = parseYamlDocs(text, 'k8s/extras/hpa-example.yaml');
    assert.deepEqual(hpas.map((h) => h.spec.scaleTargetRef.name).sort(), [...roles].sort(), 'an HPA per role');
    for (const h of hpas) {
      const metrics = (h.spec.metrics as Obj[]).map((m) => m.external);
      assert.deepEqual(metrics.map((m) => m.metric.name).sort(), ['deepq_queue_backlog', 'deepq_queue_demand']);
      const queue = subagentQueueName(String(h.spec.scaleTargetRef.name).replace(/^worker-/, ''));
      for (const m of metrics) {
        assert.deepEqual(m.metric.selector.matchLabels, { queue }, `${h.metadata.name}: ${m.metric.name} selector`);
        assert.deepEqual(m.target, { type: 'AverageValue', averageValue: '8' }, `${h.metadata.name}: target`);
      }
    }
  });
});

describe('the web inspector (deepq ui)', () => {
  /** The value after a flag in a command's args. */
  const flag = (args: string[], name: string) => args[args.indexOf(name) + 1];

  test('k8s: one ui Deployment off loopback with its token from a Secret, behind a ClusterIP Service', () => {
    const base = rawBase();
    const d = find(base, 'Deployment', 'ui');
    assert.ok(d, 'a ui Deployment');
    const c = d.spec.template.spec.containers[0] as Obj;
    const args = (c.args as unknown[]).map(String);
    assert.equal(args[0], 'ui');
    // Off loopback it refuses to start without the token: the token must come with it.
    assert.ok(WILDCARD_HOSTS.includes(flag(args, '--host')!), `ui --host ${flag(args, '--host')}`);
    const token = (c.env as Obj[]).find((e) => e.name === 'DEEPQ_UI_TOKEN');
    assert.ok(token?.valueFrom?.secretKeyRef?.name, 'DEEPQ_UI_TOKEN comes from a Secret');
    assert.ok(!(c.env as Obj[]).some((e) => e.name === 'ANTHROPIC_API_KEY'), 'the inspector gets no API key');
    const http = (c.ports as Obj[]).find((p) => p.containerPort === Number(flag(args, '--port')));
    assert.ok(http?.name, 'the --port is a named container port');
    const svc = find(base, 'Service', 'ui');
    assert.ok(svc, 'a ui Service');
    assert.equal(svc.spec.type ?? 'ClusterIP', 'ClusterIP');
    assert.ok(matches(svc.spec.selector, d.spec.template.metadata.labels), 'the Service selects the ui pods');
    assert.ok(
      svc.spec.ports.some((p: Obj) => p.targetPort === http.name || p.targetPort === http.containerPort),
      'the Service targets the inspector port',
    );
  });

  test('compose: the ui service publishes on the host loopback only, with its token from the shell', () => {
    const compose = loadCompose();
    const ui = compose.services.ui as Obj;
    assert.ok(ui, 'a ui service');
    const args = composeCommand(ui);
    assert.equal(args[0], 'ui');
    assert.ok(WILDCARD_HOSTS.includes(flag(args, '--host')!));
    const env = envList(ui.environment);
    assert.ok('DEEPQ_UI_TOKEN' in env, 'DEEPQ_UI_TOKEN is passed through');
    assert.equal(env.ANTHROPIC_API_KEY ?? '', '', 'the inspector gets no API key');
    const ports = (ui.ports ?? []).map(String);
    assert.deepEqual(ports, [`127.0.0.1:${flag(args, '--port')}:${flag(args, '--port')}`]);
  });
});

describe('the run_code sandbox (bubblewrap) in containers', () => {
  // Docker's defaults (seccomp, AppArmor, masked /proc) forbid the user namespace and the
  // /proc mount bubblewrap needs: a worker that runs code would fail its probe and exit 78.
  const SANDBOX_OPTS = ['seccomp=unconfined', 'apparmor=unconfined', 'systempaths=unconfined'];

  test('compose: the sandbox options are spelled out, and every worker whose role runs code has them', () => {
    const raw = parseYamlFile(COMPOSE_PATH)[0]!;
    const opts = (raw['x-sandbox-security-opt'] ?? []) as string[];
    for (const o of [...SANDBOX_OPTS, 'no-new-privileges:true'])
      assert.ok(opts.includes(o), `x-sandbox-security-opt lacks ${o}`);
    const compose = loadCompose();
    for (const [name, s] of deepqComposeServices(compose)) {
      const role = workerRole(composeCommand(s));
      if (!role) continue;
      const env = envList(s.environment);
      const cfgMount = composeMounts(s).find((m) => m.target === env.DEEPQ_CONFIG)!;
      const parsed = ConfigSchema.parse(YAML.parse(readFileSync(join(ROOT, cfgMount.source), 'utf8')) ?? {});
      const tools = parsed.roles.find((r) => r.name === role)?.tools ?? [];
      if (!tools.some((t) => t === 'run_code' || t === 'run_tests')) continue;
      for (const o of SANDBOX_OPTS) assert.ok((s.security_opt ?? []).includes(o), `${name} runs code: lacks ${o}`);
      assert.deepEqual(s.cap_drop, ['ALL'], `${name}: still no capabilities`);
    }
  });

  test('k8s/extras/sandbox-worker-patch.yaml parses and patches an existing worker Deployment and container', () => {
    const docs = parseYamlFile(join(K8S, 'extras/sandbox-worker-patch.yaml'));
    assert.equal(docs.length, 1);
    const patch = docs[0]!;
    assert.equal(patch.kind, 'Deployment');
    const target = find(rawBase(), 'Deployment', patch.metadata?.name);
    assert.ok(target, `no Deployment ${patch.metadata?.name} in k8s/base`);
    assert.ok(String(patch.metadata.name).startsWith('worker-'), 'it patches a worker');
    const names = (target.spec.template.spec.containers as Obj[]).map((c) => c.name);
    const pod = patch.spec.template.spec as Obj;
    for (const c of pod.containers as Obj[]) assert.ok(names.includes(c.name), `no container ${c.name} to patch`);
    assert.equal(pod.securityContext.seccompProfile.type, 'Unconfined');
    assert.equal(pod.securityContext.appArmorProfile.type, 'Unconfined');
    assert.equal(pod.hostUsers, false, 'procMount Unmasked needs pod user namespaces');
    const c = pod.containers[0] as Obj;
    assert.equal(c.securityContext.procMount, 'Unmasked');
    assert.equal(c.securityContext.allowPrivilegeEscalation, false);
    assert.deepEqual(c.securityContext.capabilities.drop, ['ALL']);
  });

  // One job's run may use memoryMb before deepq stops it, and its tmpfs mounts (the work dir with
  // its margin, /tmp, /dev/shm) are memory too; a worker runs `concurrency` jobs: a limit below
  // that let the kernel kill the whole worker (every running job) instead.
  const WORKER_OWN_MIB = 250;
  const toMiB = (q: string) => {
    const m = /^(\d+)(Mi|Gi)$/.exec(q);
    assert.ok(m, `memory quantity ${q}: expected Mi or Gi`);
    return Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1);
  };

  test('the sandbox patch sizes memory for concurrency x (memoryMb + its tmpfs mounts), and says how', () => {
    const patch = parseYamlFile(join(K8S, 'extras/sandbox-worker-patch.yaml'))[0]!;
    const target = find(rawBase(), 'Deployment', patch.metadata.name)!;
    const c = patch.spec.template.spec.containers[0] as Obj;
    const args = (target.spec.template.spec.containers[0].args as string[]).map(String);
    const fromArgs = args.includes('--concurrency') ? Number(args[args.indexOf('--concurrency') + 1]) : undefined;
    const fromEnv = ((c.env ?? []) as Obj[]).find((e) => e.name === 'DEEPQ_CONCURRENCY')?.value;
    const concurrency = fromArgs ?? Number(fromEnv ?? ConfigSchema.parse({}).concurrency);
    const { memoryMb, fileBytes } = SandboxSchema.parse({});
    const perRunMib = memoryMb + (3 * fileBytes + WORK_MARGIN_BYTES) / 2 ** 20;
    const limit = toMiB(c.resources?.limits?.memory ?? target.spec.template.spec.containers[0].resources.limits.memory);
    assert.ok(
      limit >= WORKER_OWN_MIB + concurrency * perRunMib,
      `limit ${limit} MiB < ${WORKER_OWN_MIB} + ${concurrency} x ${perRunMib} MiB: one busy worker is OOM-killed`,
    );
    const header = readFileSync(join(K8S, 'extras/sandbox-worker-patch.yaml'), 'utf8');
    assert.match(header, /250 MiB \+ concurrency x \(memoryMb \+ 3 x fileBytes\)/, 'the header states the rule');
    const readme = readText('k8s/README.md').replace(/\s+/g, ' ');
    assert.match(readme, /~250 MiB \+ concurrency × \(`memoryMb` \+ 3 × `fileBytes`\)/, 'k8s/README.md states it');
  });

  test('the lines its header gives build: the patched worker and its ScaledObject agree (kubectl)', async (t) => {
    const kubectl = onPath('kubectl');
    if (!kubectl) {
      t.skip('kubectl is not on PATH');
      return;
    }
    const header = readFileSync(join(K8S, 'extras/sandbox-worker-patch.yaml'), 'utf8').split('\n');
    const from = header.indexOf('#   patches:');
    assert.ok(from >= 0, 'the header shows the overlay lines (patches:)');
    const to = header.findIndex((l, i) => i > from && !l.startsWith('#   '));
    const overlay = YAML.parse(
      header
        .slice(from, to)
        .map((l) => l.slice(1))
        .join('\n'),
    );
    const copy = withOperatorSecrets();
    try {
      // An overlay of the operator's, as the header says: the patch file copied beside it.
      const dir = join(copy, 'overlays/sandbox');
      mkdirSync(dir);
      cpSync(join(copy, 'extras/sandbox-worker-patch.yaml'), join(dir, 'sandbox-worker-patch.yaml'));
      writeFileSync(join(dir, 'kustomization.yaml'), YAML.stringify({ resources: ['../example'], ...overlay }));
      const { stdout } = await run(kubectl, ['kustomize', dir], { timeout: 20_000, maxBuffer: 16 << 20 });
      const objs = parseYamlDocs(stdout, 'kubectl kustomize (sandbox overlay)');
      checkCluster(objs, 'sandbox overlay');
      const d = find(objs, 'Deployment', 'worker-code-writer')!;
      const c = d.spec.template.spec.containers[0] as Obj;
      const concurrency = (c.env as Obj[]).find((e) => e.name === 'DEEPQ_CONCURRENCY')?.value;
      assert.ok(concurrency, 'the patched worker has DEEPQ_CONCURRENCY');
      assert.ok(
        (c.env as Obj[]).some((e) => e.name === 'REDIS_URL'),
        'the patch merges into env, not over it',
      );
      assert.equal(d.spec.template.spec.hostUsers, false);
      const so = find(objs, 'ScaledObject', 'worker-code-writer')!;
      for (const tr of so.spec.triggers as Obj[])
        assert.equal(tr.metadata.threshold, concurrency, 'the ScaledObject targets the patched concurrency');
    } finally {
      rmSync(dirname(copy), { recursive: true, force: true });
    }
  });
});

describe('commands', () => {
  test('every container command is a real deepq command; worker roles exist in the config', async () => {
    const compose = loadCompose();
    const cmds = new Map<string, string>(); // args → where
    for (const [name, s] of deepqComposeServices(compose))
      cmds.set(JSON.stringify(composeCommand(s)), `compose ${name}`);
    const base = rawBase();
    const { roles } = checkCluster(base, 'k8s/base');
    for (const d of byKind(base, 'Deployment'))
      cmds.set(JSON.stringify(d.spec.template.spec.containers[0].args), `k8s Deployment ${d.metadata.name}`);
    for (const [json, where] of cmds) {
      const role = workerRole(JSON.parse(json));
      if (role !== undefined)
        assert.ok(roles.includes(role), `${where}: role ${role} is not in the ConfigMap config (${roles.join(', ')})`);
    }
    const distinct = [...cmds.entries()];
    await Promise.all(distinct.map(([json, where]) => assertRealCommand(JSON.parse(json), where)));
  });
});

describe('environment variables', () => {
  test('every variable deepq reads is documented in deploy/ENV.md, and set where ENV.md says', () => {
    const doc = envDoc();
    for (const v of KNOWN_VARS) assert.ok(doc.has(v), `deploy/ENV.md does not document ${v}`);
    for (const v of doc.keys()) assert.ok(KNOWN_VARS.has(v), `deploy/ENV.md documents ${v}, which deepq does not read`);

    const compose = loadCompose();
    const composeSet = new Set(deepqComposeServices(compose).flatMap(([, s]) => Object.keys(envList(s.environment))));
    const k8sSet = new Set<string>();
    const base = rawBase();
    for (const d of byKind(base, 'Deployment')) {
      const c = d.spec.template.spec.containers[0];
      for (const k of Object.keys(containerEnv(base, c, d.metadata.name))) k8sSet.add(k);
      // Set from a Secret the operator creates (not shipped with a placeholder): set all the same.
      for (const e of (c.env ?? []) as Obj[]) if (e.valueFrom?.secretKeyRef) k8sSet.add(e.name);
    }
    for (const f of walk(join(K8S, 'overlays'), (p) => /\.ya?ml$/.test(p))) {
      for (const o of parseYamlFile(f)) {
        if (o.kind === 'ConfigMap') for (const k of Object.keys(o.data ?? {})) k8sSet.add(k);
        if (o.kind === 'Kustomization')
          for (const g of (o.configMapGenerator ?? []) as Obj[])
            for (const l of (g.literals ?? []) as string[]) k8sSet.add(l.split('=')[0]!);
      }
    }
    for (const v of MUST_SET_EVERYWHERE) {
      assert.ok(composeSet.has(v), `${v} must be set in docker-compose.yml`);
      assert.ok(k8sSet.has(v), `${v} must be set in the k8s manifests`);
    }
    for (const v of KNOWN_VARS) {
      assert.ok(composeSet.has(v) || k8sSet.has(v) || doc.has(v), `${v}: neither set nor documented`);
      const row = doc.get(v)!;
      assert.equal(
        row.compose !== '-',
        composeSet.has(v),
        `deploy/ENV.md compose column of ${v} says ${JSON.stringify(row.compose)}`,
      );
      assert.equal(row.k8s !== '-', k8sSet.has(v), `deploy/ENV.md k8s column of ${v} says ${JSON.stringify(row.k8s)}`);
    }
  });
});
