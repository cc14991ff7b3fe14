/**
 * The plugin's generated static codec (cni-plugin/generated/ipam-codec.ts, written by
 * scripts/gen-ipam-codec.mjs): in sync with proto/ipam.proto, and byte-compatible with
 * full protobufjs over the .proto for every message in both directions (every field
 * set, and every field at its default), unknown fields skipped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { IPAM_PROTO_PATH } from '../../proto/ipam.js';
import { IPAM_CODECS } from '../../cni-plugin/generated/ipam-codec.js';

const GEN = fileURLToPath(new URL('../../../scripts/gen-ipam-codec.mjs', import.meta.url));
const CODEC_TS = fileURLToPath(new URL('../../../cni-plugin/generated/ipam-codec.ts', import.meta.url));

const full = new protobuf.Root();
full.loadSync(IPAM_PROTO_PATH, { keepCase: true });
full.resolveAll();
const types: protobuf.Type[] = [];
const walk = (ns: protobuf.NamespaceBase) => {
  for (const o of ns.nestedArray) {
    if (o instanceof protobuf.Type) types.push(o);
    if (o instanceof protobuf.Namespace) walk(o);
  }
};
walk(full);
const toObj = (t: protobuf.Type, b: Uint8Array) =>
  t.toObject(t.decode(b), { longs: Number, defaults: true, arrays: true });

/** A value for every field of `t`, none at its default; `seed` varies them. */
function sample(t: protobuf.Type, seed: number, depth = 0): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const f of t.fieldsArray) {
    f.resolve();
    const one = (k: number): unknown => {
      if (f.resolvedType instanceof protobuf.Type) return depth < 3 ? sample(f.resolvedType, seed + k, depth + 1) : {};
      switch (f.type) {
        case 'string':
          return `${f.name}-${seed + k}-ü/%`;
        case 'bool':
          return true;
        case 'uint32':
        case 'fixed32':
          return 4294967295 - seed - k;
        case 'int32':
        case 'sint32':
        case 'sfixed32':
          return -1000 - seed - k;
        case 'float':
        case 'double':
          return 0.5 + seed + k;
        case 'bytes':
          return Buffer.from([1, 2, seed & 255]);
        default:
          throw new Error(`test has no sample for ${f.type}`);
      }
    };
    o[f.name] = f.repeated ? [one(1), one(2)] : one(0);
  }
  return o;
}

test('the generated codec is in sync with proto/ipam.proto', async () => {
  const { ipamCodecSource } = (await import(GEN)) as { ipamCodecSource: () => string };
  assert.equal(readFileSync(CODEC_TS, 'utf8'), ipamCodecSource(), 'stale: run node scripts/gen-ipam-codec.mjs');
  assert.deepEqual(Object.keys(IPAM_CODECS).sort(), types.map((t) => t.name).sort());
});

test('every message round-trips with full protobufjs, both ways, set and default', () => {
  for (const t of types) {
    const codec = IPAM_CODECS[t.name]!;
    for (const m of [sample(t, 1), sample(t, 7)]) {
      const ours = codec.encode(m);
      assert.deepEqual(toObj(t, ours), toObj(t, t.encode(t.fromObject(m)).finish()), `${t.name}: ours → full`);
      assert.deepEqual(
        codec.decode(t.encode(t.fromObject(m)).finish()),
        toObj(t, t.encode(t.fromObject(m)).finish()),
        `${t.name}: full → ours`,
      );
    }
    assert.equal(codec.encode({}).length, 0, `${t.name}: defaults are not written`);
    assert.deepEqual(codec.decode(new Uint8Array(0)), toObj(t, new Uint8Array(0)), `${t.name}: defaults on decode`);
  }
});

test('unknown fields are skipped', () => {
  const t = full.lookupType('eniipam.v1.AddNetworkReply');
  const known = t.encode(t.fromObject({ ipv4_addr: '10.0.0.5', vpc_v4_cidrs: ['10.0.0.0/16'] })).finish();
  const w = protobuf.Writer.create();
  w.uint32((99 << 3) | 0).uint32(5);
  w.uint32((100 << 3) | 2).string('future field');
  w.uint32((101 << 3) | 5).fixed32(7);
  w.uint32((102 << 3) | 1).double(1.5);
  const withUnknown = Buffer.concat([Buffer.from(w.finish()), Buffer.from(known)]);
  const d = IPAM_CODECS.AddNetworkReply!.decode(withUnknown);
  assert.equal(d.ipv4_addr, '10.0.0.5');
  assert.deepEqual(d.vpc_v4_cidrs, ['10.0.0.0/16']);
});
