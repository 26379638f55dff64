// The tool registry. A tool spec is data plus one function: a name, a description, a zod
// input schema (the Messages API's JSON Schema is generated from it, so what the model is
// told and what is checked never drift apart) and `run(input, ctx)`. Binding specs to one
// job's context gives the `Tool[]` the agent loop consumes: each bound tool validates its
// input before running, and throws a message naming the problem (the loop turns any throw
// into an is_error tool result, so a bad call never crashes a job). No tool spawns agents.
import { type Logger, pino } from 'pino';
import { z } from 'zod';
import { ValidationError } from '../../errors.ts';
import type { JobLock } from '../../vfs/vfs.ts';
import { formatZodIssues } from '../../zod.ts';
import type { ToolDef } from '../providers/types.ts';

/** A tool bound to one job: what the agent loop offers the model and runs. */
export interface Tool {
  def: ToolDef;
  /** Validates `input` and runs; throws an Error whose message is the model's is_error result. */
  run(input: unknown): Promise<string>;
  /**
   * The configured tool name, for the `tool` metric label and the timeline (e.g.
   * `mcp:<server>/<tool>` for a tool offered under another name); defaults to `def.name`.
   */
  label?: string;
  /**
   * The name a role's `approval` list is matched against, and a human is shown, when the label is
   * not it: an MCP tool picked by `mcp:<server>/*` is gated by its own `mcp:<server>/<tool>`, even
   * where its label, bounded, is `mcp:<server>/*`. Defaults to the label.
   */
  approvalName?: string;
  /**
   * A call must not run twice (an MCP tool with outside effects): it is marked started in the
   * run's checkpoint before it goes out, and a start after the run's process died does not run
   * it again; the model is told its outcome is unknown.
   */
  atMostOnce?: boolean;
}

/** Where a job's tools act: one goal, one step, one role, one thread, one writer. */
export interface ToolScope {
  goalId: string;
  step: number;
  role: string;
  threadId: string;
  /** The writer id of every virtual-FS write (the job id: a retried job overwrites its own writes). */
  writer: string;
  /** The job's lock, held by this delivery: its writes are refused once another worker took the job. */
  lock?: JobLock;
  /**
   * The subtask's expected artifact: the one `done` artifact its tools may write (the plan
   * contract let the plan name it, so it is a revision, and the old version is kept).
   */
  artifact?: string;
}

/** What a tool's `run` gets besides its input: the job's scope, its abort signal and its logger. */
export interface ToolContext extends ToolScope {
  signal: AbortSignal;
  log: Logger;
}

export interface ToolSpec<S extends z.ZodType = z.ZodType> {
  /** The name the model calls (`^[a-zA-Z0-9_-]{1,64}$`, as the Messages API requires). */
  readonly name: string;
  readonly description: string;
  /** The input schema: a zod object. Validated before `run`; its JSON Schema is the tool's input_schema. */
  readonly input: S;
  run(input: z.output<S>, ctx: ToolContext): Promise<string>;
}

/** Declares a tool spec (an identity function, there to infer `run`'s input type from the schema). */
export function defineTool<S extends z.ZodType>(spec: ToolSpec<S>): ToolSpec<S> {
  return spec;
}

const TOOL_NAME_RE = /^[a-zA-Z0-9_-]{1,64}$/;
const defs = new WeakMap<ToolSpec, ToolDef>();
const schemas = new WeakMap<z.ZodType, Record<string, unknown>>();

/**
 * The JSON Schema of a tool input: zod 4's, input side (fields with defaults are optional),
 * without the `$schema` key and the safe-integer bounds zod adds to every integer. Computed
 * once per schema object; callers must not change it.
 */
function inputSchema(name: string, input: z.ZodType): Record<string, unknown> {
  let json = schemas.get(input);
  if (json) return json;
  json = z.toJSONSchema(input, {
    io: 'input',
    override: ({ jsonSchema: s }) => {
      if (s.maximum === Number.MAX_SAFE_INTEGER) delete s.maximum;
      if (s.minimum === Number.MIN_SAFE_INTEGER) delete s.minimum;
    },
  }) as Record<string, unknown>;
  delete json.$schema;
  if (json.type !== 'object') throw new Error(`tool ${name}: the input schema must be an object`);
  schemas.set(input, json);
  return json;
}

/** The Messages API definition of a spec, its input_schema generated from the zod input. */
export function toolDef(spec: ToolSpec): ToolDef {
  let def = defs.get(spec);
  if (!def) {
    if (!TOOL_NAME_RE.test(spec.name)) {
      throw new Error(`tool name ${JSON.stringify(spec.name)} is not a valid API name`);
    }
    def = { name: spec.name, description: spec.description, input_schema: inputSchema(spec.name, spec.input) };
    defs.set(spec, def);
  }
  return def;
}

/** Parses a tool's input or throws a ValidationError naming each bad field. */
export function parseToolInput<S extends z.ZodType>(spec: ToolSpec<S>, input: unknown): z.output<S> {
  const r = spec.input.safeParse(input ?? {});
  if (!r.success) throw new ValidationError(`bad arguments for ${spec.name}: ${formatZodIssues(r.error)}`);
  return r.data;
}

const silent = pino({ level: 'silent' });
const never = new AbortController().signal;

/** The context of a job's tools: its scope, plus a signal and a logger (silent and never-aborting by default). */
export function toolContext(scope: ToolScope, extra: { signal?: AbortSignal; log?: Logger } = {}): ToolContext {
  return { ...scope, signal: extra.signal ?? never, log: extra.log ?? silent };
}

/** One spec bound to one job: validate, refuse once the job is aborted, run. */
export function bindTool(spec: ToolSpec, ctx: ToolContext): Tool {
  const def = toolDef(spec);
  return {
    def,
    label: spec.name,
    async run(input: unknown): Promise<string> {
      const args = parseToolInput(spec, input);
      if (ctx.signal.aborted) throw new Error(`${spec.name} not run: the job was aborted`);
      return spec.run(args, ctx);
    },
  };
}

/** Named tool specs; `bind` picks some by name and binds them to a job. */
export class ToolRegistry {
  private readonly specs = new Map<string, ToolSpec>();

  constructor(specs: Iterable<ToolSpec> = []) {
    for (const s of specs) this.register(s);
  }

  /** Adds a spec; a second spec of the same name, or an invalid name or schema, throws. */
  register(spec: ToolSpec): this {
    if (this.specs.has(spec.name)) throw new Error(`tool ${spec.name} is registered twice`);
    toolDef(spec);
    this.specs.set(spec.name, spec);
    return this;
  }

  get(name: string): ToolSpec | undefined {
    return this.specs.get(name);
  }

  has(name: string): boolean {
    return this.specs.has(name);
  }

  names(): string[] {
    return [...this.specs.keys()];
  }

  /** The named specs bound to `ctx`, in the order named; a name not registered throws. */
  bind(names: readonly string[], ctx: ToolContext): Tool[] {
    return names.map((n) => {
      const spec = this.specs.get(n);
      if (!spec) throw new Error(`unknown tool ${JSON.stringify(n)} (registered: ${this.names().join(', ')})`);
      return bindTool(spec, ctx);
    });
  }
}
