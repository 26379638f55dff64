// One ModelProvider over several: each request goes to the provider its model ref names
// (`<provider>:<id>`, a bare id meaning anthropic), with the bare id; the answer's model comes
// back in canonical form (`local:qwen3:8b`, `claude-sonnet-5-5-20250929`), which is what usage
// is booked under. The scripted model, when it stands in, answers every ref as it is.
// The answer's id comes from the endpoint, not from deepq: it names a field of the goal's usage
// (read by every move of the goal) and a row of `deepq status`, so only a plain id of at most
// 128 characters is taken; any other answer is booked under the id asked for.
import { modelLabel } from './model-labels.ts';
import { modelKey, parseModelRef } from './model-ref.ts';
import {
  type CallContext,
  type MetricLabels,
  ModelCallError,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
} from './types.ts';
import { wellFormedRequest } from './well-formed.ts';

const SERVED_ID = /^[A-Za-z0-9._:/@+-]{1,128}$/;

export class ProviderRouter implements ModelProvider {
  readonly name: string;
  /**
   * @param backends the providers by config name
   * @param configured canonical ids of the configured models (metric labels)
   * @param standIn a provider answering every ref unchanged (the scripted model)
   */
  constructor(
    private readonly backends: ReadonlyMap<string, ModelProvider>,
    private readonly configured: ReadonlySet<string>,
    private readonly standIn?: ModelProvider,
  ) {
    this.name = standIn ? standIn.name : [...backends.keys()].join(',');
  }

  async createMessage(req: ModelRequest, ctx: CallContext): Promise<ModelResponse> {
    if (this.standIn) return this.standIn.createMessage(req, ctx);
    const { provider, model } = parseModelRef(req.model);
    const backend = this.backends.get(provider);
    if (!backend) {
      const known = [...this.backends.keys()].join(', ');
      throw new ModelCallError(
        `no provider "${provider}" for model ${JSON.stringify(req.model)} (have: ${known})`,
        'client',
      );
    }
    const res = await backend.createMessage(wellFormedRequest({ ...req, model }), ctx);
    return { ...res, model: modelKey({ provider, model: SERVED_ID.test(res.model) ? res.model : model }) };
  }

  metricLabels(requested: string, returned?: string): MetricLabels {
    const provider = this.standIn ? this.standIn.name : parseModelRef(requested).provider;
    return {
      provider: this.standIn || this.backends.has(provider) ? provider : 'other',
      model: modelLabel(this.configured, requested, returned),
    };
  }
}
