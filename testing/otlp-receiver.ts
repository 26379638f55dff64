// A local OTLP/HTTP endpoint for tests: it takes what the real OpenTelemetry exporter posts to
// /v1/traces (OTLP's JSON encoding) and keeps each span with its service's name.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  status?: { code?: number; message?: string };
  attributes: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** What OTEL_EXPORTER_OTLP_ENDPOINT is set to. */
  url: string;
  spans: ReceivedSpan[];
  /** Requests that were not a JSON trace export (a content type or path the test did not expect). */
  rejected: string[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue & { arrayValue?: { values?: AnyValue[] } } };

function attrValue(v: KeyValue['value']): unknown {
  if (v.arrayValue) return (v.arrayValue.values ?? []).map((x) => attrValue(x));
  if (v.intValue !== undefined) return Number(v.intValue);
  return v.stringValue ?? v.boolValue ?? v.doubleValue;
}

const attrsOf = (list: KeyValue[] = []) => Object.fromEntries(list.map((kv) => [kv.key, attrValue(kv.value)]));

function collect(body: string, into: ReceivedSpan[]): void {
  const parsed = JSON.parse(body) as {
    resourceSpans?: { resource?: { attributes?: KeyValue[] }; scopeSpans?: { spans?: Record<string, unknown>[] }[] }[];
  };
  for (const rs of parsed.resourceSpans ?? []) {
    const service = String(attrsOf(rs.resource?.attributes)['service.name'] ?? '');
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? [])
        into.push({
          service,
          traceId: String(s.traceId),
          spanId: String(s.spanId),
          parentSpanId: s.parentSpanId ? String(s.parentSpanId) : undefined,
          name: String(s.name),
          kind: Number(s.kind),
          status: s.status as ReceivedSpan['status'],
          attributes: attrsOf(s.attributes as KeyValue[]),
        });
  }
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const rejected: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const type = req.headers['content-type'] ?? '';
      if (req.url !== '/v1/traces' || !type.includes('json')) {
        rejected.push(`${req.method} ${req.url} ${type}`);
        res.writeHead(415).end();
        return;
      }
      try {
        collect(body, spans);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch (err) {
        rejected.push(`unparsable: ${(err as Error).message}`);
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    rejected,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
