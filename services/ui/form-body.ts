// A POST's form fields. A body that is not valid form data (a multipart body without its
// boundary's parts, say) is the client's mistake: a 400 that says so, not a 500 that blames Redis.
import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { BodyData } from 'hono/utils/body';

export const MALFORMED_FORM = 'The form could not be read: its body is not valid form data.';

export async function formBody(c: Context, opts: { all?: boolean } = {}): Promise<BodyData<{ all: true }>> {
  try {
    return await c.req.parseBody({ all: opts.all ?? false });
  } catch (cause) {
    throw new HTTPException(400, { message: MALFORMED_FORM, cause });
  }
}
