// Bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069) reorder the text after them
// as it is drawn: model-written input shown to a human who must approve it could read as another
// command than the one that runs ("Trojan Source"). Where a human reads model text to decide, or
// on a terminal, they are shown as visible escapes. (The weak marks LRM, RLM and ALM stay: they
// cannot reorder text, and right-to-left writing uses them.)
export const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/g;

/** `\u202e` style, as JSON writes an escape. */
const bidiEscape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

export function showBidiControls(text: string): string {
  return text.replace(BIDI_CONTROLS, bidiEscape);
}

/** DEL, the C1 controls (U+009B is a one-character CSI on many terminals) and the bidi controls. */
const RAW_IN_JSON = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * JSON text with what JSON.stringify leaves raw and a terminal may act on written as `\u009b`
 * escapes: the same JSON value, safe to print (C0 controls JSON escapes itself).
 */
export function escapeRawInJson(json: string): string {
  return json.replace(RAW_IN_JSON, bidiEscape);
}
