// Model references name a provider and a model: `<provider>:<model id>`, split at the first
// colon, so ids with colons of their own (`local:qwen3:8b`) keep them. A bare id means the
// predefined `anthropic` provider: configs written before providers existed keep working, and
// `anthropic:<id>` and `<id>` are one model (its canonical form is the bare id).

export const DEFAULT_PROVIDER = 'anthropic';

export interface ModelRef {
  provider: string;
  model: string;
}

export function parseModelRef(ref: string): ModelRef {
  const colon = ref.indexOf(':');
  if (colon < 0) return { provider: DEFAULT_PROVIDER, model: ref };
  return { provider: ref.slice(0, colon), model: ref.slice(colon + 1) };
}

/** The one spelling deepq books usage and looks prices up under: bare for anthropic. */
export function modelKey(ref: ModelRef): string {
  return ref.provider === DEFAULT_PROVIDER ? ref.model : `${ref.provider}:${ref.model}`;
}

export function canonicalModel(ref: string): string {
  return modelKey(parseModelRef(ref));
}

/** Where a config names a model: the tier map, a role, the planner or the reflector. */
export interface ModelRefSite {
  path: (string | number)[];
  ref: string;
}

export function modelRefSites(cfg: {
  models: { HIGH: string; LOW: string };
  roles: { model?: string }[];
  planner: { model?: string };
  reflector: { model?: string };
}): ModelRefSite[] {
  const sites: ModelRefSite[] = [
    { path: ['models', 'HIGH'], ref: cfg.models.HIGH },
    { path: ['models', 'LOW'], ref: cfg.models.LOW },
  ];
  for (const [i, role] of cfg.roles.entries())
    if (role.model) sites.push({ path: ['roles', i, 'model'], ref: role.model });
  for (const k of ['planner', 'reflector'] as const) {
    const model = cfg[k].model;
    if (model) sites.push({ path: [k, 'model'], ref: model });
  }
  return sites;
}

/** Why a model reference cannot be served by the configured providers, or null. */
export function modelRefProblem(ref: string, providers: readonly string[]): string | null {
  const { provider, model } = parseModelRef(ref);
  if (!model) return `${JSON.stringify(ref)} names no model after "${provider}:"`;
  if (provider === DEFAULT_PROVIDER || providers.includes(provider)) return null;
  const known = [DEFAULT_PROVIDER, ...providers].join(', ');
  return (
    `${JSON.stringify(ref)} names provider "${provider}", which is not configured (providers: ${known}); ` +
    'an Anthropic id with a colon of its own is written anthropic:<id>'
  );
}
