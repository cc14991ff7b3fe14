/**
 * The plugin's static protobuf codecs come from cni-plugin/generated/ipam-descriptor.ts;
 * this checks it is in sync with proto/ipam.proto (regenerate with
 * `node scripts/gen-ipam-descriptor.mjs`) and that it encodes what proto-loader decodes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import protobuf from 'protobufjs';
import { IPAM_PROTO_PATH, IPAM_API_VERSION } from '../../proto/ipam.js';
import { IPAM_DESCRIPTOR } from '../../cni-plugin/generated/ipam-descriptor.js';

test('generated descriptor equals the .proto', () => {
  const root = new protobuf.Root();
  root.loadSync(IPAM_PROTO_PATH, { keepCase: true });
  assert.deepEqual(JSON.parse(JSON.stringify(IPAM_DESCRIPTOR)), root.toJSON({ keepComments: false }));
});

test('light codec round-trips with the full .proto codec', () => {
  const full = new protobuf.Root();
  full.loadSync(IPAM_PROTO_PATH, { keepCase: true });
  const light = protobuf.Root.fromJSON(IPAM_DESCRIPTOR as protobuf.INamespace);
  const req = {
    api_version: IPAM_API_VERSION,
    client_version: '0.1.0',
    container_id: 'abc',
    if_name: 'eth0',
    network_name: 'aws-cni',
    netns: '/proc/1/ns/net',
    k8s_pod_name: 'p',
    k8s_pod_namespace: 'ns',
    k8s_pod_infra_container_id: 'abc',
    k8s_pod_uid: 'u',
    reason: 'cni-del',
  };
  const T1 = light.lookupType('eniipam.v1.DelNetworkRequest');
  const T2 = full.lookupType('eniipam.v1.DelNetworkRequest');
  assert.deepEqual(T2.toObject(T2.decode(T1.encode(T1.fromObject(req)).finish())), req);
  const rep = {
    success: true,
    ipv4_addr: '10.0.5.9',
    ipv6_addr: '2600:1f14:aa:bb00::a',
    device_number: 2,
    route_table_id: 3,
    vpc_v4_cidrs: ['10.0.0.0/16', '100.64.0.0/16'],
    use_external_snat: true,
    eni_id: 'eni-1',
    message: '',
    ip_family: 'dual',
    ipv6_prefix_len: 128,
    egress_v4_addr: '',
  };
  const R1 = full.lookupType('eniipam.v1.AddNetworkReply');
  const R2 = light.lookupType('eniipam.v1.AddNetworkReply');
  assert.deepEqual(
    R2.toObject(R2.decode(R1.encode(R1.fromObject(rep)).finish()), { defaults: true, longs: Number }),
    rep,
  );
});
