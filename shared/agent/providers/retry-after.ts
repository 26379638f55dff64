// How long a 429 or 5xx asks the caller to wait: `retry-after-ms`, else `retry-after` in
// seconds or as an HTTP date. 0 is a real answer (retry at once), absent is undefined.

export function parseRetryAfterMs(headers: Headers | Record<string, string> | undefined): number | undefined {
  if (!headers) return undefined;
  const get = (k: string) =>
    (headers instanceof Headers ? headers.get(k) : (headers as Record<string, string>)[k]) ?? null;
  const ms = get('retry-after-ms');
  if (ms !== null && ms !== '' && Number.isFinite(Number(ms))) return Math.max(0, Number(ms));
  const s = get('retry-after');
  if (s === null || s === '') return undefined;
  if (Number.isFinite(Number(s))) return Math.max(0, Number(s) * 1000);
  const at = Date.parse(s);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}
