// Text a model or a user wrote, made safe to print on a terminal. A control character in a
// reflection reason, a failure reason, a goal or an artifact would otherwise reach the
// terminal as a command (ESC [2J clears the screen, ESC ]0;…BEL retitles the window, and the
// C1 byte U+009B is a one-character CSI on many terminals). Every C0 control (U+0000–U+001F),
// DEL (U+007F) and every C1 control (U+0080–U+009F) is shown as a visible escape instead.

import { escapeRawInJson } from '../shared/runtime/bidi.ts';

// Bidirectional overrides and isolates too (shared/runtime/bidi.ts): they reorder what follows.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
// Multi-line text keeps its line breaks and tabs (a CR only as part of CRLF: a lone CR would
// return to the start of the line and let what follows overwrite what came before).
const CONTROL_EXCEPT_LAYOUT =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
  /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]|\r(?!\n)/g;

const SHORT: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** `\n`, `\r`, `\t`, or `\u001b` style: the way JSON writes the character. */
function visible(c: string): string {
  return SHORT[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/** One line of text: every control character, line breaks and tabs included, escaped. */
export function safeLine(s: string): string {
  return s.replace(CONTROL, visible);
}

/** Multi-line text (an artifact's contents): keeps `\n`, `\t` and CRLF, escapes every other control. */
export function safeText(s: string): string {
  return s.replace(CONTROL_EXCEPT_LAYOUT, visible);
}

/**
 * JSON for a terminal or a pipe: JSON.stringify escapes C0 controls but writes DEL and C1
 * controls raw; those become `\u007f`…`\u009f`, which is still the same JSON value.
 */
export function safeJson(value: unknown, indent?: number): string {
  return escapeRawInJson(JSON.stringify(value, null, indent));
}

// Characters a terminal draws two columns wide: East Asian wide and fullwidth forms, and emoji
// shown as emoji by default. Marks and joiners take none (they join the character before).
const WIDE = new RegExp(
  '[\\u1100-\\u115f\\u2e80-\\u303e\\u3041-\\u33ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\ua000-\\ua4cf\\uac00-\\ud7a3' +
    '\\uf900-\\ufaff\\ufe30-\\ufe4f\\uff00-\\uff60\\uffe0-\\uffe6\\u{20000}-\\u{3fffd}]|\\p{Emoji_Presentation}',
  'u',
);
const ZERO_WIDTH = /^(?:\p{Mn}|\p{Me}|\p{Cf})+$/u;
const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** Columns a terminal gives one grapheme: 0, 1 or 2. */
function graphemeWidth(g: string): number {
  if (ZERO_WIDTH.test(g)) return 0;
  return WIDE.test(g) ? 2 : 1;
}

/** Columns `s` (one line, controls already escaped) takes on a terminal. */
export function displayWidth(s: string): number {
  let w = 0;
  for (const { segment } of graphemes.segment(s)) w += graphemeWidth(segment);
  return w;
}

/**
 * `s` in at most `max` characters, ending in `…` when cut: at the last space in its second half
 * when there is one, so that a reason is not cut mid-word; whole code points always.
 */
export function clip(s: string, max: number): string {
  const chars = [...s];
  if (chars.length <= max) return s;
  const cut = chars.slice(0, max - 1).join('');
  const space = cut.lastIndexOf(' ');
  return `${(space > cut.length / 2 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/**
 * One line cut to `columns` (display width, whole characters), ending in `…` when cut: a line
 * the terminal wraps takes more rows than a redraw counts. Unchanged without a width.
 */
export function fitLine(s: string, columns: number | undefined): string {
  if (!columns || columns < 2 || displayWidth(s) <= columns) return s;
  let out = '';
  let w = 0;
  for (const { segment } of graphemes.segment(s)) {
    const gw = graphemeWidth(segment);
    if (w + gw > columns - 1) break;
    out += segment;
    w += gw;
  }
  return `${out}…`;
}
