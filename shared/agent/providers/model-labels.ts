// The `model` label of deepq_llm_* metrics comes from configured models only. The id an
// endpoint returns is used when it is configured, or when it is the requested model with a
// date appended (Anthropic answers an alias with a dated id); anything else is `other`, so a
// gateway that returns arbitrary ids cannot explode the label cardinality.
import { canonicalModel, modelRefSites } from './model-ref.ts';
import { undated } from './prices.ts';
import type { MetricLabels, ModelProvider } from './types.ts';

export const OTHER_MODEL = 'other';

/** The canonical ids of every model the config names (tiers, roles, planner, reflector). */
export function configuredModels(cfg: Parameters<typeof modelRefSites>[0]): Set<string> {
  return new Set(modelRefSites(cfg).map((s) => canonicalModel(s.ref)));
}

export function modelLabel(configured: ReadonlySet<string>, requested: string, returned?: string): string {
  const asked = canonicalModel(requested);
  const askedLabel = configured.has(asked) ? asked : OTHER_MODEL;
  if (returned === undefined || returned === '') return askedLabel;
  const answered = canonicalModel(returned);
  if (configured.has(answered)) return answered;
  return answered === asked || undated(answered) === asked ? askedLabel : OTHER_MODEL;
}

/** A call's labels from its provider; one without metricLabels: its name and the requested id. */
export function metricLabelsOf(p: ModelProvider, requested: string, returned?: string): MetricLabels {
  return p.metricLabels?.(requested, returned) ?? { provider: p.name, model: requested };
}
