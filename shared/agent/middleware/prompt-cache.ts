// Anthropic prompt caching: cache_control on the system prompt and the tool list. The
// system text is unchanged (P52: the role's prompt and nothing else).
import type { ModelMiddleware } from './types.ts';

export function promptCache(): ModelMiddleware {
  return (req, _ctx, next) => {
    const system = typeof req.system === 'string' ? [{ type: 'text' as const, text: req.system }] : req.system;
    const cachedSystem = system.map((b, i) =>
      i === system.length - 1 ? { ...b, cache_control: { type: 'ephemeral' as const } } : b,
    );
    const tools = req.tools?.map((t, i, all) =>
      i === all.length - 1 ? { ...t, cache_control: { type: 'ephemeral' as const } } : t,
    );
    return next({ ...req, system: cachedSystem, ...(tools ? { tools } : {}) });
  };
}
