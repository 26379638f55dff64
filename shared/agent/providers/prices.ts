// Which price applies to a model that was used. The API may answer with an id other than
// the one asked for (Anthropic answers an alias with a dated id), and a table keyed by the
// alias must still price it. In order:
//   1. the id the response reported, exactly;
//   2. the id it was requested as (the configured alias);
//   3. the reported id without a trailing date: `-20250929`, `-2025-09-29` or `@20250929`.
// Keys and ids are compared in canonical form (`anthropic:<id>` is `<id>`). The scripted
// model's own ids are always free. No match: the price is unknown, never taken as $0.
import { canonicalModel } from './model-ref.ts';

export interface Price {
  inputPerMTok: number;
  outputPerMTok: number;
  cacheReadPerMTok: number;
  cacheWritePerMTok: number;
}

export type PriceTable = Record<string, Price>;

export interface PriceMatch {
  price: Price;
  by: 'exact' | 'alias' | 'dated';
  /** The table key that matched (canonical). */
  key: string;
}

export const DATED_SUFFIX = /[-@](\d{8}|\d{4}-\d{2}-\d{2})$/;

const FREE: Price = { inputPerMTok: 0, outputPerMTok: 0, cacheReadPerMTok: 0, cacheWritePerMTok: 0 };
const SCRIPTED_IDS = ['scripted-high', 'scripted-low'];

const canonicalTables = new WeakMap<PriceTable, Map<string, Price>>();

/** The table with canonical keys; a later spelling of the same model wins. Cached per table. */
function canonicalTable(prices: PriceTable): Map<string, Price> {
  let table = canonicalTables.get(prices);
  if (!table) {
    table = new Map(SCRIPTED_IDS.map((id) => [id, FREE]));
    for (const [key, price] of Object.entries(prices)) table.set(canonicalModel(key), price);
    canonicalTables.set(prices, table);
  }
  return table;
}

export function findPrice(prices: PriceTable, model: string, requestedAs?: string): PriceMatch | undefined {
  const table = canonicalTable(prices);
  const candidates: [PriceMatch['by'], string | undefined][] = [
    ['exact', canonicalModel(model)],
    ['alias', requestedAs === undefined ? undefined : canonicalModel(requestedAs)],
    ['dated', undated(canonicalModel(model))],
  ];
  for (const [by, key] of candidates) {
    const price = key === undefined ? undefined : table.get(key);
    if (price) return { price, by, key: key! };
  }
  return undefined;
}

/** The id without its trailing date, or undefined when it has none. */
export function undated(model: string): string | undefined {
  return DATED_SUFFIX.test(model) ? model.replace(DATED_SUFFIX, '') : undefined;
}

/** What tokens of each kind cost at a price, in USD. */
export function priceUsage(
  price: Price,
  u: { input: number; output: number; cache_read: number; cache_write: number },
): number {
  return (
    (u.input * price.inputPerMTok +
      u.output * price.outputPerMTok +
      u.cache_read * price.cacheReadPerMTok +
      u.cache_write * price.cacheWritePerMTok) /
    1e6
  );
}
