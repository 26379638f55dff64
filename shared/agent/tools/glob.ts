// Glob patterns over artifact names, for list_files and grep. One small matcher of our own
// rather than Node's path.matchesGlob: that is missing before Node 20.17 and still prints an
// ExperimentalWarning on Node 20 and 22; this one behaves the same everywhere and cannot
// backtrack (a table over pattern × name). Its cost is tokens × name length per name, so the
// tokens of all alternatives together are capped: a model's glob cannot block the worker for
// seconds over a goal's 500 names (64 alternatives of 500 tokens did, 7-19 s).
//
//   *        any run of characters except "/"          (*.py: a.py, not src/a.py)
//   **       as a whole segment: any number of segments, none included
//            (src/**/*.py: src/a.py, src/x/y/a.py; **/*.md: every .md; docs/**: all under docs/)
//   ?        one character except "/"
//   [abc] [a-z] [!a-z] [^a-z]   one character of (or not of) a set, never "/"
//   {a,b}    alternatives (may nest; at most 64 in all)
//   \x       x itself
// A leading "." is matched like any other character.

export const GLOB_MAX_CHARS = 500;
const MAX_ALTERNATIVES = 64;
/** Tokens (a character, a wildcard, a set) across all alternatives. */
export const GLOB_MAX_TOKENS = 256;

type Token =
  | { k: 'lit'; c: string }
  | { k: 'one' }
  | { k: 'set'; neg: boolean; ranges: [string, string][] }
  | { k: 'star' }
  | { k: 'all' }
  | { k: 'dirs' };

/** A glob compiled to a predicate on names; a malformed glob throws an Error saying what is wrong. */
export function compileGlob(glob: string): (name: string) => boolean {
  if (glob.length === 0) throw new Error('glob is empty');
  if (glob.length > GLOB_MAX_CHARS) throw new Error(`glob is ${glob.length} chars (max ${GLOB_MAX_CHARS})`);
  const alternatives: string[] = [];
  expandBraces(glob, alternatives);
  const compiled = alternatives.map(tokenize);
  const tokens = compiled.reduce((n, t) => n + t.length, 0);
  if (tokens > GLOB_MAX_TOKENS)
    throw new Error(`glob is too complex: ${tokens} tokens across its alternatives (max ${GLOB_MAX_TOKENS})`);
  return (name) => compiled.some((t) => matchTokens(t, name));
}

/** The unescaped `{` at or after `from` and its matching `}`, or null; an unclosed `{` throws. */
function braceAt(p: string, from: number): [number, number] | null {
  for (let i = from; i < p.length; i++) {
    if (p[i] === '\\') i++;
    else if (p[i] === '{') {
      let depth = 0;
      for (let j = i; j < p.length; j++) {
        if (p[j] === '\\') j++;
        else if (p[j] === '{') depth++;
        else if (p[j] === '}' && --depth === 0) return [i, j];
      }
      throw new Error(`glob has a "{" at ${i + 1} without its "}"`);
    }
  }
  return null;
}

/** The parts of a brace body split at its top-level unescaped commas. */
function splitAlternatives(body: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '\\') i++;
    else if (c === '{') depth++;
    else if (c === '}') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(body.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(body.slice(start));
  return parts;
}

function expandBraces(p: string, out: string[]): void {
  const at = braceAt(p, 0);
  if (!at) {
    if (out.length >= MAX_ALTERNATIVES) throw new Error(`glob has more than ${MAX_ALTERNATIVES} alternatives`);
    out.push(p);
    return;
  }
  const [open, close] = at;
  for (const alt of splitAlternatives(p.slice(open + 1, close))) {
    expandBraces(p.slice(0, open) + alt + p.slice(close + 1), out);
  }
}

/** The (possibly escaped) set member at `j` and the index after it. */
function setChar(p: string, j: number): [string, number] {
  return p[j] === '\\' && j + 1 < p.length ? [p[j + 1]!, j + 2] : [p[j]!, j + 1];
}

/** `[...]` starting at `i`: the set token and the index after its `]`. */
function parseSet(p: string, i: number): [Token, number] {
  let j = i + 1;
  const neg = p[j] === '!' || p[j] === '^';
  if (neg) j++;
  const ranges: [string, string][] = [];
  for (let first = true; ; first = false) {
    if (j >= p.length) throw new Error(`glob has a "[" at ${i + 1} without its "]"`);
    if (p[j] === ']' && !first) return [{ k: 'set', neg, ranges }, j + 1];
    const [lo, afterLo] = setChar(p, j);
    let hi = lo;
    j = afterLo;
    if (p[j] === '-' && j + 1 < p.length && p[j + 1] !== ']') {
      [hi, j] = setChar(p, j + 1);
      if (hi < lo) throw new Error(`glob has a backwards range [${lo}-${hi}]`);
    }
    ranges.push([lo, hi]);
  }
}

function tokenize(p: string): Token[] {
  const out: Token[] = [];
  for (let i = 0; i < p.length; ) {
    const c = p[i]!;
    if (c === '*') {
      let j = i;
      while (p[j] === '*') j++;
      const segment = j - i >= 2 && (i === 0 || p[i - 1] === '/') && (j === p.length || p[j] === '/');
      if (segment && j === p.length) out.push({ k: 'all' });
      else if (segment) out.push({ k: 'dirs' });
      else if (out[out.length - 1]?.k !== 'star') out.push({ k: 'star' });
      i = segment && j < p.length ? j + 1 : j;
    } else if (c === '?') {
      out.push({ k: 'one' });
      i++;
    } else if (c === '[') {
      const [tok, next] = parseSet(p, i);
      out.push(tok);
      i = next;
    } else if (c === '\\' && i + 1 < p.length) {
      out.push({ k: 'lit', c: p[i + 1]! });
      i += 2;
    } else {
      out.push({ k: 'lit', c });
      i++;
    }
  }
  return out;
}

function oneChar(t: Token, c: string): boolean {
  if (t.k === 'lit') return t.c === c;
  if (c === '/') return false;
  if (t.k === 'one') return true;
  if (t.k !== 'set') return false;
  const hit = t.ranges.some(([lo, hi]) => c >= lo && c <= hi);
  return t.neg ? !hit : hit;
}

/** Whether `toks` match all of `s`: a table from the last token back, one row at a time. */
function matchTokens(toks: Token[], s: string): boolean {
  const n = s.length;
  let next = new Uint8Array(n + 1);
  next[n] = 1;
  for (let i = toks.length - 1; i >= 0; i--) {
    const t = toks[i]!;
    const cur = new Uint8Array(n + 1);
    if (t.k === 'star' || t.k === 'all') {
      cur[n] = next[n]!;
      for (let j = n - 1; j >= 0; j--) cur[j] = next[j] || (t.k === 'all' || s[j] !== '/' ? cur[j + 1]! : 0);
    } else if (t.k === 'dirs') {
      // Nothing, or anything ending in "/".
      let slash = 0;
      cur[n] = next[n]!;
      for (let j = n - 1; j >= 0; j--) {
        if (s[j] === '/' && next[j + 1]) slash = 1;
        cur[j] = next[j] || slash;
      }
    } else {
      for (let j = n - 1; j >= 0; j--) cur[j] = next[j + 1] && oneChar(t, s[j]!) ? 1 : 0;
    }
    next = cur;
  }
  return next[0] === 1;
}
