// A request as the model APIs take it. A lone UTF-16 surrogate anywhere in it (half an emoji left
// by a cut, or quoted by a parse error) makes them refuse the whole call (400), on every retry.
import { wellFormedStrings } from '../../text.ts';
import type { ModelRequest } from './types.ts';

/** `req` itself when every string in it is well-formed, else a copy with U+FFFD for each lone surrogate. */
export function wellFormedRequest(req: ModelRequest): ModelRequest {
  return allWellFormed(req) ? req : (JSON.parse(JSON.stringify(req, wellFormedStrings)) as ModelRequest);
}

function allWellFormed(v: unknown): boolean {
  if (typeof v === 'string') return v.isWellFormed();
  if (Array.isArray(v)) return v.every(allWellFormed);
  if (v !== null && typeof v === 'object') return Object.values(v).every(allWellFormed);
  return true;
}
