// A timeline stream entry's event (field `e`, JSON), as GoalStore writes it. An entry that is
// not one (written by something else) is skipped, never shown half-parsed.
import type { TimelineEvent } from '../../../shared/goal/events.ts';

export function eventOf(fields: string[]): TimelineEvent | null {
  const at = fields.indexOf('e');
  if (at < 0 || at % 2 !== 0) return null;
  try {
    const e = JSON.parse(fields[at + 1] ?? '') as TimelineEvent;
    return e && typeof e === 'object' && typeof e.type === 'string' && typeof e.at === 'number' ? e : null;
  } catch {
    return null;
  }
}
