import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isLoopbackHost } from '../../services/ui/security/bind-policy.ts';
import { hostName } from '../../services/ui/security/host-check.ts';

test('hostName strips the port, and the brackets of an IPv6 address', () => {
  assert.equal(hostName('localhost:8080'), 'localhost');
  assert.equal(hostName('127.0.0.1'), '127.0.0.1');
  assert.equal(hostName('[::1]:8080'), '::1');
  assert.equal(hostName('evil.example:8080'), 'evil.example');
});

test('only loopback names pass: a name that merely starts like one does not', () => {
  for (const h of ['localhost:1', '127.0.0.1:1', '127.5.6.7', '[::1]:80']) assert.ok(isLoopbackHost(hostName(h)), h);
  for (const h of ['evil.example:1', '127.0.0.1.evil.example', 'localhost.evil.example:1', '[::2]:1', ''])
    assert.ok(!isLoopbackHost(hostName(h)), h);
});
