// The subagent tools: the registry (tools/registry.ts), the built-in virtual-FS tools scoped to
// one goal (tools/vfs-tools.ts) and their helpers. There is no tool that dispatches agents:
// subagents cannot recurse. This module is the one import path for all of it.
export { compileGlob, GLOB_MAX_CHARS } from './tools/glob.ts';
export { compilePattern, GREP_LIMITS, type GrepLimits, GrepTimeoutError, scanFiles } from './tools/grep.ts';
export { countLines, cutChars, READ_PAGE_MAX_CHARS, readPage, splitLines, suggestedLimit } from './tools/paging.ts';
export {
  bindTool,
  defineTool,
  parseToolInput,
  type Tool,
  type ToolContext,
  ToolRegistry,
  type ToolScope,
  type ToolSpec,
  toolContext,
  toolDef,
} from './tools/registry.ts';
export {
  createSandboxTools,
  defaultTestCommand,
  runCodeTool,
  runTestsTool,
  type SandboxToolDeps,
  sandboxToolSpecs,
} from './tools/run-code.ts';
export {
  type BuiltinToolName,
  createVfsTools,
  type VfsToolOptions,
  vfsToolRegistry,
  vfsToolSpecs,
} from './tools/vfs-tools.ts';
