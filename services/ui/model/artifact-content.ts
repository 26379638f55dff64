// One artifact for the Artifact page and its download: the entry and its content, read
// together. Inline content comes with the entry (one MULTI); spilled content is opened in the
// blob store and streamed, never held whole. A blob replaced between the two reads (a newer
// version, an eviction) is gone by design: the entry is read again.
import type { ReadStream } from 'node:fs';
import type { FileEntry } from '../../../shared/vfs/vfs.ts';
import type { UiContext } from '../context.ts';

export type ArtifactBody =
  | { kind: 'inline'; text: string }
  | { kind: 'spilled'; stream: ReadStream }
  | { kind: 'gone' };

export interface OpenArtifact {
  entry: FileEntry;
  body: ArtifactBody;
}

const ATTEMPTS = 5;

async function readEntry(ctx: UiContext, goalId: string, name: string) {
  const keys = ctx.client.goals.keys;
  const res = await ctx.client.redis.multi().hget(keys.files(goalId), name).hget(keys.content(goalId), name).exec();
  const raw = (res?.[0]?.[1] as string | null) ?? null;
  const inline = (res?.[1]?.[1] as string | null) ?? null;
  return { raw, inline };
}

export async function openArtifact(ctx: UiContext, goalId: string, name: string): Promise<OpenArtifact | null> {
  for (let attempt = 1; ; attempt++) {
    const { raw, inline } = await readEntry(ctx, goalId, name);
    if (!raw) return null;
    const entry: FileEntry = { name, ...(JSON.parse(raw) as Omit<FileEntry, 'name'>) };
    if (entry.status === 'evicted') return { entry, body: { kind: 'gone' } };
    if (!entry.blobRef) return { entry, body: { kind: 'inline', text: inline ?? '' } };
    try {
      return { entry, body: { kind: 'spilled', stream: await ctx.blobs.openStream(entry.blobRef) } };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= ATTEMPTS) throw err;
    }
  }
}
