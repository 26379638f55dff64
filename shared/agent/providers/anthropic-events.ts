// Streamed Messages-API events as the SDK's MessageStream expects them, and what its answer
// loses. A gateway that reports no usage (message_start or message_delta without it) made the
// SDK fail every answer (it reads `usage.output_tokens` unguarded): the usage is filled in for
// the SDK and dropped from the answer, which is then estimated as for an answer sent whole. And
// the SDK's tool input is its partial-JSON parse of what streamed: a gateway's broken JSON became
// a partial object the tool ran with; the text goes to the tool as it came instead (its schema
// check tells the model), as on the OpenAI wire.
import type Anthropic from '@anthropic-ai/sdk';
import { estimatedUsage, type ModelRequest, type ModelUsage, reportedUsage } from './types.ts';

type StreamEvent = Anthropic.RawMessageStreamEvent;

export class StreamedMessageMender {
  /** Each tool_use block's input as it streamed, by content index. */
  private readonly rawInput = new Map<number, string>();
  private usageMissing = false;
  /** The answer began (message_start), with the usage it reported then; what streamed since, in characters. */
  private began?: { usage?: Anthropic.Usage };
  private streamedChars = 0;

  readonly mend = (e: StreamEvent): StreamEvent => {
    this.count(e);
    if (e.type === 'message_start' && !e.message.usage) {
      this.usageMissing = true;
      return { ...e, message: { ...e.message, usage: { input_tokens: 0, output_tokens: 0 } as Anthropic.Usage } };
    }
    if (e.type === 'message_delta' && !e.usage) {
      this.usageMissing = true;
      return { ...e, usage: { output_tokens: 0 } as Anthropic.MessageDeltaUsage };
    }
    if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') {
      this.rawInput.set(e.index, (this.rawInput.get(e.index) ?? '') + e.delta.partial_json);
    }
    return e;
  };

  private count(e: StreamEvent): void {
    if (e.type === 'message_start') this.began = { usage: e.message.usage };
    if (e.type !== 'content_block_delta') return;
    const d = e.delta as { text?: string; partial_json?: string; thinking?: string };
    this.streamedChars += (d.text ?? d.partial_json ?? d.thinking ?? '').length;
  }

  /**
   * What the call had used when it failed after its answer began: the input its start reported
   * (estimated where it reported none) and the output that streamed, about 4 characters a token.
   */
  spent(req: ModelRequest): ModelUsage | undefined {
    if (!this.began) return undefined;
    const input = reportedUsage(this.began.usage) ?? estimatedUsage(req, []);
    return { ...input, output_tokens: Math.ceil(this.streamedChars / 4), estimated: true };
  }

  /** The message as deepq takes it: tool inputs as they streamed, no usage where none came. */
  finish(message: Anthropic.Message): Anthropic.Message {
    const content = message.content.map((b, i) => {
      const raw = this.rawInput.get(i);
      return b.type === 'tool_use' && raw !== undefined ? { ...b, input: wholeJson(raw) } : b;
    });
    return { ...message, content, usage: this.usageMissing ? (undefined as never) : message.usage };
  }
}

/** The input's JSON value, or its text where it is not whole JSON; none streamed is `{}`. */
function wholeJson(raw: string): unknown {
  if (!raw.trim()) return {};
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}
