// Bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069) reorder the text after them
// as it is drawn: model-written input shown to a human who must approve it could read as another
// command than the one that runs ("Trojan Source"). Where a human reads model text, or on a
// terminal, they are shown as visible escapes. The marks LRM, RLM and ALM stay there (right-to-left
// writing uses them) but not where a human decides: see HIDDEN.
export const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/g;

/** `\u200b`, a character beyond the BMP as its two surrogates (`\udb40\udc41`): JSON's escapes. */
function jsonEscape(c: string): string {
  let out = '';
  for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`;
  return out;
}

export function showBidiControls(text: string): string {
  return text.replace(BIDI_CONTROLS, jsonEscape);
}

// Characters that draw nothing, or a line break where none shows: in a tool call a human approves,
// `exa\u200bmple.com` reads as example.com, tag characters (U+E0000–U+E007F) carry text no one sees,
// and between two right-to-left marks (RLM, or ALM U+061C) `cat > f` is drawn `cat < f`. Every
// default-ignorable code point (Unicode's own list: soft hyphen, zero-width characters, the bidi
// marks and controls, fillers, variation selectors, tags) and the line and paragraph separators.
// Only where a human decides: elsewhere a ZWJ joins an emoji.
const HIDDEN = /[\p{Default_Ignorable_Code_Point}\u2028\u2029]/gu;

/**
 * Text a human decides on (an approval's input): the bidi controls and every invisible character
 * escaped the way JSON escapes them, so that JSON stays the same value.
 */
export function showHiddenCharacters(text: string): string {
  return text.replace(HIDDEN, jsonEscape);
}

/** DEL, the C1 controls (U+009B is a one-character CSI on many terminals) and the bidi controls. */
const RAW_IN_JSON = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * JSON text with what JSON.stringify leaves raw and a terminal may act on written as `\u009b`
 * escapes: the same JSON value, safe to print (C0 controls JSON escapes itself).
 */
export function escapeRawInJson(json: string): string {
  return json.replace(RAW_IN_JSON, jsonEscape);
}
