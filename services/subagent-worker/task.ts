// The subagent's task: the instruction plus the contents of the read_files it names, as one
// user message (P52: nothing else from any other agent). The message stays within
// cfg.vfs.taskMaxChars: the instruction always goes in full; the files go in, in order,
// while they fit; the first that does not fit is cut at a line boundary, and those after it
// are named only. Each cut or left-out file says how big it is and how to page through it
// with read_file (offset/limit), so no artifact is out of reach, however big.
import { countLines, cutChars, suggestedLimit } from '../../shared/agent/tools.ts';
import type { Config } from '../../shared/runtime/config.ts';
import type { SubagentJob } from '../../shared/runtime/jobs.ts';
import type { VirtualFs } from '../../shared/vfs/vfs.ts';

export interface TaskRuntime {
  vfs: Pick<VirtualFs, 'read'>;
  cfg: { vfs: Pick<Config['vfs'], 'taskMaxChars'> };
}

const SEP = '\n\n';
/** A file is cut only if at least this much of it can be shown; otherwise it is named only. */
const MIN_EXCERPT_CHARS = 200;

interface TaskFile {
  name: string;
  content: string | null;
  /** The length of `# name\n<content>`, built only if it is chosen. */
  fullLength: number;
  /** The file named only (or, when missing, the note saying so): what it takes at least. */
  stub: string;
}

const header = (name: string) => `# ${name}\n`;
const readOn = (name: string, offset: number, limit: number) =>
  `Read ${offset ? 'on' : 'it'} with the read_file tool, a page at a time: ` +
  `{"name":${JSON.stringify(name)},"offset":${offset},"limit":${limit}}; each page names the next offset.`;
const sizeOf = (lines: number, chars: number) => `It has ${lines} lines (${chars} chars)`;

function describe(name: string, content: string | null, budget: number): TaskFile {
  if (content === null) {
    const stub = `${header(name)}(not available: the file was evicted or never written)`;
    return { name, content, fullLength: stub.length, stub };
  }
  const lines = countLines(content);
  const stub =
    `${header(name)}[deepq: ${name} is not included: the task reached its ${budget}-char limit. ` +
    `${sizeOf(lines, content.length)}. ${readOn(name, 0, suggestedLimit(content.length, lines, 0))}]`;
  return { name, content, fullLength: header(name).length + content.length, stub };
}

/** The marker after a cut file: lines 1-`whole` shown, then the first `partial` chars of the next line. */
function cutMarker(f: TaskFile, budget: number, whole: number, partial: number, limit: number): string {
  const content = f.content!;
  const lines = countLines(content);
  const start = `the first ${partial} chars of line ${whole + 1}`;
  let shown = `lines 1-${whole}${partial ? ` and ${start}` : ''} are shown above`;
  if (!whole) shown = `only ${start} are shown above`;
  // A line cut part way goes on from its next char; whole lines from the next line.
  const readRest = partial
    ? `Read on with the read_file tool: {"name":${JSON.stringify(f.name)},"offset":${whole},"char_offset":${partial}}` +
      '; each page names the next.'
    : readOn(f.name, whole, limit);
  return (
    `[deepq: ${f.name} is cut here to keep the task within ${budget} chars. ` +
    `${sizeOf(lines, content.length)}; ${shown}. ${readRest}]`
  );
}

/**
 * `# name`, the file's start and the marker, within `room`; null if too little would show.
 * The cut falls at a line boundary, unless that would waste over half the room (a very long
 * line): then the next line shows in part, and paging starts again at that line.
 */
function cutFile(f: TaskFile, room: number, budget: number): string | null {
  const content = f.content!;
  // The marker's numbers never have more digits than the file's totals, nor its limit more
  // than the one suggested from line 0: this bounds its length.
  const total = countLines(content);
  const maxLimit = suggestedLimit(content.length, total, 0);
  const bound = Math.max(
    cutMarker(f, budget, total, content.length, maxLimit).length,
    cutMarker(f, budget, 0, content.length, maxLimit).length,
  );
  const window = room - header(f.name).length - bound - 1;
  if (window < MIN_EXCERPT_CHARS) return null;
  const wholeEnd = content.lastIndexOf('\n', window - 1) + 1;
  let whole = 0;
  for (let i = content.indexOf('\n'); i !== -1 && i < wholeEnd; i = content.indexOf('\n', i + 1)) whole++;
  const shown = wholeEnd >= window / 2 ? content.slice(0, wholeEnd) : `${cutChars(content, window)}\n`;
  const partial = Math.max(0, shown.length - 1 - wholeEnd);
  const marker = cutMarker(f, budget, whole, partial, suggestedLimit(content.length, total, whole));
  const part = `${header(f.name)}${shown}${marker}`;
  return part.length <= room ? part : null;
}

/**
 * The files' parts, within `room` chars in all. Every file's stub is reserved up front, so
 * each file gets the free room plus its own stub's: in full if it fits, else cut, else named;
 * once one is not whole, the budget is spent and the rest are named only.
 */
function packFiles(files: TaskFile[], room: number, budget: number): string[] {
  let free = room - files.reduce((n, f) => n + f.stub.length, 0);
  let spent = false;
  return files.map((f) => {
    const avail = free + f.stub.length;
    let part = f.stub;
    if (f.content !== null && !spent) {
      if (f.fullLength <= avail) part = `${header(f.name)}${f.content}`;
      else part = cutFile(f, avail, budget) ?? f.stub;
      spent = part.length < f.fullLength;
    }
    free = avail - part.length;
    return part;
  });
}

/** `text` itself if it fits in `max`, else cut with a marker saying so. */
function fit(text: string, max: number): string {
  if (text.length <= max) return text;
  const marker = `\n[deepq: cut here: the task's limit is too small for the rest]`;
  return max > marker.length ? cutChars(text, max - marker.length) + marker : cutChars(text, max);
}

/**
 * Only when taskMaxChars is too small for the instruction and one line per file (a config
 * far below the plan's limits): one line naming the files, and the instruction cut if it
 * must be, so the budget still holds.
 */
function squeezed(files: TaskFile[], task: string, budget: number): string {
  const names = files.map((f) => (f.content === null ? `${f.name} (not available)` : f.name)).join(', ');
  const notice =
    `[deepq: the read_files are not included: the task reached its ${budget}-char limit. ` +
    `Read them with the read_file tool, a page at a time with offset and limit: ${names}]`;
  const head = fit(notice, Math.max(Math.floor(budget / 4), budget - task.length - SEP.length));
  return `${head}${SEP}${fit(task, budget - head.length - SEP.length)}`.slice(0, budget);
}

export async function buildSubagentTask(rt: TaskRuntime, job: SubagentJob): Promise<string> {
  const budget = rt.cfg.vfs.taskMaxChars;
  if (!job.read_files.length) return fit(job.instruction, budget);
  const files: TaskFile[] = [];
  for (const name of job.read_files) files.push(describe(name, await rt.vfs.read(job.goalId, name), budget));
  const task = `## Task\n${job.instruction}`;
  // One separator after each file: between the files, and before the task.
  const room = budget - task.length - SEP.length * files.length;
  if (room < files.reduce((n, f) => n + f.stub.length, 0)) return squeezed(files, task, budget);
  return `${packFiles(files, room, budget).join(SEP)}${SEP}${task}`;
}
