// The grep tool's search: a model-written JS regex over a goal's artifacts, line by line,
// bounded every way a model's pattern could hurt a worker. The text scanned is capped
// (scanMaxChars, across files), matches stop at maxMatches, each shown line is cut at
// lineMaxChars, and the scan runs in a vm context with a timeout, so a catastrophically
// backtracking pattern such as /(a+)+$/ ends with an error instead of blocking the process.
import vm from 'node:vm';
import { cutChars } from './paging.ts';

export interface GrepLimits {
  /** Matches shown at most; the result says when there were more. */
  maxMatches: number;
  /** Each matching line is shown cut to this many chars. */
  lineMaxChars: number;
  /** Chars scanned at most per call, across files; files past it are named as not searched. */
  scanMaxChars: number;
  /** Wall time the regex may run per call. */
  timeBudgetMs: number;
}

export const GREP_LIMITS: GrepLimits = {
  maxMatches: 200,
  lineMaxChars: 300,
  scanMaxChars: 5_000_000,
  timeBudgetMs: 1000,
};

export interface GrepFile {
  name: string;
  text: string;
}

export interface GrepHit {
  name: string;
  line: number;
  text: string;
}

/** Thrown when the pattern ran past the time budget: the model should simplify it. */
export class GrepTimeoutError extends Error {}

// The scan runs in its own context so that a timeout can stop it mid-regex. It returns at
// most maxMatches + 1 hits: the extra one only says that there were more.
const SCAN_SOURCE = `globalThis.__scan = function (a) {
  const hits = [];
  for (const f of a.files) {
    const t = f.text;
    for (let start = 0, line = 1; start < t.length; line++) {
      let end = t.indexOf('\\n', start);
      if (end === -1) end = t.length;
      const text = t.slice(start, end);
      if (a.re.test(text)) {
        hits.push({ name: f.name, line: line, text: text });
        if (hits.length > a.max) return hits;
      }
      start = end + 1;
    }
  }
  return hits;
};`;

let sandbox: { ctx: vm.Context; call: vm.Script } | undefined;

function scanner(): { ctx: vm.Context; call: vm.Script } {
  if (!sandbox) {
    const ctx = vm.createContext(Object.create(null));
    new vm.Script(SCAN_SOURCE).runInContext(ctx);
    sandbox = { ctx, call: new vm.Script('__scan(__args)') };
  }
  return sandbox;
}

/** Compiles a model's pattern; a bad one throws an Error saying why. */
export function compilePattern(pattern: string, ignoreCase: boolean): RegExp {
  try {
    return new RegExp(pattern, ignoreCase ? 'i' : '');
  } catch (err) {
    throw new Error(`bad regex ${JSON.stringify(pattern)}: ${(err as Error).message}`);
  }
}

/**
 * The lines of `files` that `re` matches, in order: at most `limits.maxMatches` (`more` says
 * whether there were others), each cut to `limits.lineMaxChars` (`cut` says whether one was).
 * The caller bounds the text; this bounds the time.
 */
export function scanFiles(
  re: RegExp,
  files: GrepFile[],
  limits: Pick<GrepLimits, 'maxMatches' | 'lineMaxChars' | 'timeBudgetMs'>,
): { hits: GrepHit[]; more: boolean; cut: boolean } {
  // A global or sticky regex would carry lastIndex from one line to the next.
  const plain = new RegExp(re.source, re.flags.replace(/[gy]/g, ''));
  const s = scanner();
  s.ctx.__args = { re: plain, files, max: limits.maxMatches };
  let raw: GrepHit[];
  try {
    raw = s.call.runInContext(s.ctx, { timeout: limits.timeBudgetMs }) as GrepHit[];
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_SCRIPT_EXECUTION_TIMEOUT') throw err;
    throw new GrepTimeoutError(
      `the pattern took longer than ${limits.timeBudgetMs} ms and was stopped (catastrophic backtracking?): ` +
        'simplify it, e.g. avoid nested quantifiers such as (a+)+, or narrow the files with glob',
    );
  } finally {
    delete s.ctx.__args;
  }
  const more = raw.length > limits.maxMatches;
  let cut = false;
  const hits = raw.slice(0, limits.maxMatches).map((h) => {
    let text = h.text.endsWith('\r') ? h.text.slice(0, -1) : h.text;
    if (text.length > limits.lineMaxChars) {
      text = `${cutChars(text, limits.lineMaxChars)}…`;
      cut = true;
    }
    return { name: h.name, line: h.line, text };
  });
  return { hits, more, cut };
}
