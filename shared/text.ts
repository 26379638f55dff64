// Text handed on from a model or a user: cut to a size, and made well-formed. A lone UTF-16
// surrogate (half an emoji, from a cut or a `\ud83d` escape) makes JSON that Redis's cjson refuses
// to decode and a request that a model API refuses (400): each becomes U+FFFD.

/** Text cut to `max` chars (an ellipsis marks the cut), well-formed. */
export function cutText(text: string, max: number): string {
  const cut = text.length > max ? `${text.slice(0, max)}…` : text;
  return cut.toWellFormed();
}

/** A JSON reviver or replacer: each string well-formed. */
export const wellFormedStrings = (_key: string, value: unknown) =>
  typeof value === 'string' ? value.toWellFormed() : value;

/**
 * Every string in a parsed JSON value made well-formed, in place, without recursion: a reviver
 * (JSON.parse's internal walk is recursive) overflowed the stack on a value 5,000 levels deep.
 */
export function wellFormedDeep(value: unknown): unknown {
  if (typeof value === 'string') return value.toWellFormed();
  for (const stack = [value]; stack.length; ) {
    const node = stack.pop();
    if (!node || typeof node !== 'object') continue;
    const obj = node as Record<string, unknown>;
    for (const k of Object.keys(obj)) {
      const v = obj[k];
      if (typeof v === 'string') obj[k] = v.toWellFormed();
      else if (v && typeof v === 'object') stack.push(v);
    }
  }
  return value;
}
