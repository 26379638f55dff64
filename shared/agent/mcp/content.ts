// An MCP tool result as the text of a tool_result: text passes through; images, audio and
// embedded resources become one line naming their type and size (the agent loop sends text
// only); `isError` results are thrown, so the agent loop returns them as is_error.
import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/sdk/types.js';

/** Bytes of a base64 payload, without decoding it. */
export function base64Bytes(data: string): number {
  const clean = data.replace(/[\s]/g, '');
  const pad = clean.endsWith('==') ? 2 : clean.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((clean.length * 3) / 4) - pad);
}

function mime(m: string | undefined): string {
  return m ? ` ${m}` : '';
}

/** One content block as text. */
export function blockToText(block: ContentBlock): string {
  switch (block.type) {
    case 'text':
      return block.text;
    case 'image':
      return `[image${mime(block.mimeType)}, ${base64Bytes(block.data)} bytes]`;
    case 'audio':
      return `[audio${mime(block.mimeType)}, ${base64Bytes(block.data)} bytes]`;
    case 'resource': {
      const r = block.resource;
      const bytes = 'text' in r ? Buffer.byteLength(r.text, 'utf8') : base64Bytes(r.blob);
      return `[embedded resource ${r.uri}${mime(r.mimeType)}, ${bytes} bytes]`;
    }
    case 'resource_link':
      return `[resource link ${block.uri}${mime(block.mimeType)}${block.name ? ` (${block.name})` : ''}]`;
    default:
      return `[${String((block as { type?: unknown }).type)} content]`;
  }
}

/** The result's text: its content blocks, one per line (structured content when there is none). */
export function resultText(result: Pick<CallToolResult, 'content' | 'structuredContent'>): string {
  const content = Array.isArray(result.content) ? result.content : [];
  if (content.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return content.map(blockToText).join('\n');
}

/** The text for the model, or a thrown Error with the server's message when `isError` is set. */
export function toolResultOrThrow(result: CallToolResult, scrub: (s: string) => string = (s) => s): string {
  const text = scrub(resultText(result));
  if (result.isError) throw new Error(text.trim() || 'the MCP tool reported an error without a message');
  return text;
}
