// Paging through an artifact by line: read_file's offset/limit and the subagent task's
// cut markers (services/subagent-worker/task.ts) share these helpers.

/**
 * A page of read_file (offset/limit) holds at most this many chars, cut at a line boundary,
 * so the agent loop's tool-result limit (50,000 chars by default) never silently drops lines
 * the page header claims to show.
 */
export const READ_PAGE_MAX_CHARS = 40_000;

/** The lines of a text, split at "\n"; a final "\n" ends the last line, it starts no new one. */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** How many lines splitLines finds, without building them. */
export function countLines(text: string): number {
  if (text === '') return 0;
  let n = text.endsWith('\n') ? 0 : 1;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/** `text` cut to at most `max` chars, never between the halves of a surrogate pair. */
export function cutChars(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = Math.max(0, max);
  const c = text.charCodeAt(end - 1);
  if (end > 0 && c >= 0xd800 && c <= 0xdbff) end--;
  return text.slice(0, end);
}

/** A `limit` to suggest for paging through `text` from line `from`: about one page of READ_PAGE_MAX_CHARS. */
export function suggestedLimit(chars: number, lines: number, from: number): number {
  const perLine = lines > 0 ? chars / lines : 1;
  const fit = Math.max(1, Math.floor(READ_PAGE_MAX_CHARS / Math.max(1, perLine)) - 1);
  return Math.max(1, Math.min(fit, lines - from));
}

/**
 * Lines `offset` .. `offset + limit - 1` (0-based) of an artifact, after a header naming them
 * 1-based (`lines 101-200 of 5000`) and the offset of the next page. A page is cut at a line
 * boundary to pageMaxChars (the header then says so); a single line longer than that is read a
 * page at a time from `charOffset` (0-based, within line `offset`), the header naming the next.
 */
export function readPage(
  name: string,
  content: string,
  offset: number,
  limit: number | undefined,
  pageMaxChars = READ_PAGE_MAX_CHARS,
  charOffset = 0,
): string {
  const lines = splitLines(content);
  const total = lines.length;
  if (total === 0) {
    if (offset > 0) throw new Error(`offset ${offset} is past the end of ${name}: it is empty (0 lines)`);
    return `[${name}: empty, 0 lines]`;
  }
  if (offset >= total) {
    throw new Error(
      `offset ${offset} is past the end of ${name}: it has ${total} lines, so offset must be 0-${total - 1}`,
    );
  }
  if (charOffset > 0) return readInLine(name, lines, offset, charOffset, pageMaxChars);
  const want = Math.min(limit ?? total, total - offset);
  const out: string[] = [];
  let chars = 0;
  for (let i = offset; i < offset + want; i++) {
    const line = lines[i]!;
    const cost = line.length + (out.length ? 1 : 0);
    if (out.length && chars + cost > pageMaxChars) break;
    out.push(line);
    chars += cost;
  }
  const notes: string[] = [];
  if (out[0]!.length > pageMaxChars) return readInLine(name, lines, offset, 0, pageMaxChars);
  if (out.length < want) {
    notes.push(`page cut to ${pageMaxChars} chars: ${out.length} of the ${want} lines asked for`);
  }
  const next = offset + out.length;
  notes.push(next < total ? `next page: offset ${next}` : 'end of file');
  return `[${name}: lines ${offset + 1}-${next} of ${total}; ${notes.join('; ')}]\n${out.join('\n')}`;
}

/** Part of one long line, from `from` (0-based chars) to at most pageMaxChars on; the header names the next part. */
function readInLine(name: string, lines: string[], offset: number, from: number, pageMaxChars: number): string {
  const line = lines[offset]!;
  if (from >= line.length)
    throw new Error(
      `char_offset ${from} is past the end of line ${offset + 1} of ${name}: it has ${line.length} chars`,
    );
  const part = cutChars(line.slice(from), pageMaxChars);
  const end = from + part.length;
  const next =
    end < line.length
      ? `next page: offset ${offset} char_offset ${end}`
      : offset + 1 < lines.length
        ? `next page: offset ${offset + 1}`
        : 'end of file';
  const where = `line ${offset + 1} of ${lines.length}, chars ${from + 1}-${end} of ${line.length}`;
  return `[${name}: ${where}; ${next}]\n${part}`;
}
