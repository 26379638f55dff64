// Text a model or a user wrote, made safe to print on a terminal. A control character in a
// reflection reason, a failure reason, a goal or an artifact would otherwise reach the
// terminal as a command (ESC [2J clears the screen, ESC ]0;…BEL retitles the window, and the
// C1 byte U+009B is a one-character CSI on many terminals). Every C0 control (U+0000–U+001F),
// DEL (U+007F) and every C1 control (U+0080–U+009F) is shown as a visible escape instead.

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
// Multi-line text keeps its line breaks and tabs (a CR only as part of CRLF: a lone CR would
// return to the start of the line and let what follows overwrite what came before).
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL_EXCEPT_LAYOUT = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]|\r(?!\n)/g;
const C1_AND_DEL = /[\u007f-\u009f]/g;

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
  return JSON.stringify(value, null, indent).replace(C1_AND_DEL, visible);
}
