import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CniError } from '../../cni-plugin/errors.js';
import { encodeAddResult, versionResult, type Attachment } from '../../cni-plugin/result.js';

const a: Attachment = {
  hostVeth: { name: 'eni0123456789ab', mac: '02:11:22:33:44:55' },
  pod: { ifName: 'eth0', mac: '02:aa:bb:cc:dd:ee', netns: '/var/run/netns/cni-1234' },
  ipv4: '10.0.5.17',
  mtu: 9001,
};

test('0.3.0, 0.3.1, 0.4.0: IP configs carry "version":"4"', () => {
  for (const v of ['0.3.0', '0.3.1', '0.4.0']) {
    assert.equal(
      JSON.stringify(encodeAddResult(v, a)),
      JSON.stringify({
        cniVersion: v,
        interfaces: [
          { name: 'eni0123456789ab', mac: '02:11:22:33:44:55' },
          { name: 'eth0', mac: '02:aa:bb:cc:dd:ee', sandbox: '/var/run/netns/cni-1234' },
        ],
        ips: [{ version: '4', address: '10.0.5.17/32', gateway: '169.254.1.1', interface: 1 }],
        routes: [{ dst: '0.0.0.0/0' }],
        dns: {},
      }),
    );
  }
});

test('1.0.0: no "version" in IP configs', () => {
  assert.equal(
    JSON.stringify(encodeAddResult('1.0.0', a)),
    JSON.stringify({
      cniVersion: '1.0.0',
      interfaces: [
        { name: 'eni0123456789ab', mac: '02:11:22:33:44:55' },
        { name: 'eth0', mac: '02:aa:bb:cc:dd:ee', sandbox: '/var/run/netns/cni-1234' },
      ],
      ips: [{ address: '10.0.5.17/32', gateway: '169.254.1.1', interface: 1 }],
      routes: [{ dst: '0.0.0.0/0' }],
      dns: {},
    }),
  );
});

test('1.1.0: interfaces also carry their mtu', () => {
  assert.equal(
    JSON.stringify(encodeAddResult('1.1.0', a)),
    JSON.stringify({
      cniVersion: '1.1.0',
      interfaces: [
        { name: 'eni0123456789ab', mac: '02:11:22:33:44:55', mtu: 9001 },
        { name: 'eth0', mac: '02:aa:bb:cc:dd:ee', sandbox: '/var/run/netns/cni-1234', mtu: 9001 },
      ],
      ips: [{ address: '10.0.5.17/32', gateway: '169.254.1.1', interface: 1 }],
      routes: [{ dst: '0.0.0.0/0' }],
      dns: {},
    }),
  );
});

test('VERSION answer', () => {
  assert.equal(
    JSON.stringify(versionResult()),
    '{"cniVersion":"1.1.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}',
  );
});

test('error object shape', () => {
  const e = new CniError(11, 'try again', 'pool empty');
  assert.equal(
    JSON.stringify(e.toJSON('0.4.0')),
    '{"cniVersion":"0.4.0","code":11,"msg":"try again","details":"pool empty"}',
  );
});
