// hono/html's tag, typed for how the views use it: every interpolated value is escaped
// (& < > " '), fragments built by this tag are not escaped twice, and no view ever
// interpolates a promise, so a render is always a plain string.
import { html as honoHtml, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import { showBidiControls } from '../../../shared/runtime/bidi.ts';

export type Html = HtmlEscapedString;

/**
 * Text read from Redis (model- or user-written) with its bidi controls shown as escapes: drawn,
 * they reorder what follows, and a human deciding on a reason or an instruction would read
 * another text than the one written. Fragments built by the tag were shown already.
 */
const visible = (v: unknown): unknown =>
  typeof v === 'string' ? showBidiControls(v) : Array.isArray(v) ? v.map(visible) : v;

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  return honoHtml(strings, ...values.map(visible)) as Html;
}

/** A link path built from fixed parts and encoded values: never a scheme, so never `javascript:`. */
export function path(parts: TemplateStringsArray, ...values: (string | number)[]): string {
  return parts.reduce((out, part, i) => out + part + (i < values.length ? encodeURIComponent(values[i]!) : ''), '');
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** The five characters the tag escapes, escaped (bidi controls left to the caller). */
const escaped = (text: string) => text.replace(/[&<>"']/g, (ch) => ESCAPES[ch]!);

/** For text streamed outside the tag (artifact contents): the same five characters it escapes, bidi controls shown. */
export function escapeHtml(text: string): string {
  return escaped(showBidiControls(text));
}

/**
 * What a user typed, given back in a form field after a refusal: escaped, its bidi controls kept
 * as they are (shown as escapes, a resend would store other text than the user's).
 */
export function formValue(text: string): Html {
  return raw(escaped(text));
}

/** What a request asked for, in an error message: in quotes and cut at 80 characters. */
export function quoted(text: string): string {
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
}

/** The app's own fixed markup, inserted as is: never for anything read from Redis or a request. */
export function ownMarkup(markup: string): Html {
  return raw(markup);
}
