import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../shared/errors.ts';
import { portInUse, reachableUrl } from '../../shared/runtime/addresses.ts';

test('a wildcard bind is reached on loopback; an IPv6 address goes in brackets', () => {
  assert.equal(reachableUrl('0.0.0.0', 9464, '/metrics'), 'http://127.0.0.1:9464/metrics');
  assert.equal(reachableUrl('::', 8080), 'http://127.0.0.1:8080/');
  assert.equal(reachableUrl('::1', 8080), 'http://[::1]:8080/');
  assert.equal(reachableUrl('10.0.0.5', 80), 'http://10.0.0.5:80/');
  assert.equal(reachableUrl('inspector.local', 80), 'http://inspector.local:80/');
});

test('a port in use is a config error naming the port, the host and the setting to change', () => {
  const err = portInUse('metrics port', 9464, '127.0.0.1', 'another deepq up', 'pick another with METRICS_PORT');
  assert.ok(err instanceof ConfigError);
  assert.equal(
    err.message,
    'metrics port 9464 on 127.0.0.1 is in use (another deepq up, on this machine?): pick another with METRICS_PORT',
  );
});
