// The MCP client manager (README "Tools and MCP"): a worker connects to the MCP servers its
// role names (`mcp:<server>/<tool>`, `mcp:<server>/*`) and offers their tools to its agent as
// `mcp__<server>__<tool>`.
export { McpCallError, McpConnection, type McpToolInfo } from './connection.ts';
export { blockToText, resultText, toolResultOrThrow } from './content.ts';
export { McpManager, type McpManagerOptions, type RoleMcpServers, resolveRoleServers } from './manager.ts';
export { API_TOOL_NAME_RE, assignToolNames, namespacedToolName } from './names.ts';
export { mcpSelection, type ResolvedServer, resolveServer, secretForms } from './resolve.ts';
