#!/usr/bin/env node
/**
 * Generates `cni-plugin/generated/ipam-codec.ts`: static protobuf encoders/decoders for
 * every message of `proto/ipam.proto`, written against protobufjs/minimal's `Writer` and
 * `Reader` (the library does the wire primitives: varints, UTF-8, length prefixes). The
 * CNI plugin uses them instead of protobufjs/light's reflection (`Root.fromJSON`, then
 * encoders compiled with `new Function` at every start, which a V8 code cache cannot
 * keep): measured in bench/cni-plugin-startup.ts.
 *
 * Semantics are proto3 as decoded by `@grpc/proto-loader` with `{ keepCase: true,
 * longs: Number, defaults: true }` (ipamd's options): field names as in the .proto,
 * default values filled in (0, '', false, [] for repeated, null for a message field),
 * default-valued fields not written, repeated numeric fields packed (both forms read),
 * unknown fields skipped. Supported field types: bool, string, bytes, int32, uint32,
 * sint32, fixed32, sfixed32, float, double, messages, and `repeated` of them; anything
 * else (64-bit integers, enums, maps, oneofs) stops the generator with an error.
 *
 * Usage: `node scripts/gen-ipam-codec.mjs [--check]` (`--check`: exit 1 when the file
 * is stale, write nothing). Exported for the bundle script: `ipamCodecSource()`,
 * `writeIpamCodec()`, `CODEC_PATH`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

const root = fileURLToPath(new URL('..', import.meta.url));
/** The contract the codec is generated from. */
export const PROTO_PATH = `${root}proto/ipam.proto`;
/** The generated module (committed; the build refreshes it when stale). */
export const CODEC_PATH = `${root}cni-plugin/generated/ipam-codec.ts`;

/** field type → [wire type, Writer/Reader method, default literal, packable] */
const SCALARS = {
  bool: [0, 'bool', 'false', true],
  int32: [0, 'int32', '0', true],
  uint32: [0, 'uint32', '0', true],
  sint32: [0, 'sint32', '0', true],
  fixed32: [5, 'fixed32', '0', true],
  sfixed32: [5, 'sfixed32', '0', true],
  float: [5, 'float', '0', true],
  double: [1, 'double', '0', true],
  string: [2, 'string', "''", false],
  bytes: [2, 'bytes', 'new Uint8Array(0)', false],
};

const tag = (id, wire) => ((id << 3) | wire) >>> 0;

/** Code of `encode<Name>` and `decode<Name>` for one message type. */
function messageCode(type) {
  const n = type.name;
  const enc = [];
  const dec = [];
  const defaults = [];
  for (const f of type.fieldsArray) {
    f.resolve();
    const k = JSON.stringify(f.name);
    const acc = `m[${k}]`;
    if (f.map || f.partOf)
      throw new Error(`${type.fullName}.${f.name}: maps and oneofs are not supported by gen-ipam-codec`);
    const scalar = SCALARS[f.type];
    const msg = !scalar && f.resolvedType instanceof protobuf.Type ? f.resolvedType.name : undefined;
    if (!scalar && !msg)
      throw new Error(
        `${type.fullName}.${f.name}: type ${f.type} is not supported by gen-ipam-codec (add it to SCALARS)`,
      );
    if (f.repeated) {
      defaults.push(`${k}: []`);
      if (msg) {
        enc.push(`  for (const v of ${acc} ?? []) encode${msg}(v, w.uint32(${tag(f.id, 2)}).fork()).ldelim();`);
        dec.push(`      case ${f.id}: ${acc}.push(decode${msg}(r, r.uint32())); break;`);
      } else if (scalar[3]) {
        enc.push(
          `  if (${acc}?.length) { w.uint32(${tag(f.id, 2)}).fork(); for (const v of ${acc}) w.${scalar[1]}(v); w.ldelim(); }`,
        );
        dec.push(
          `      case ${f.id}: if ((t & 7) === 2) { const e = r.uint32() + r.pos; while (r.pos < e) ${acc}.push(r.${scalar[1]}()); } else ${acc}.push(r.${scalar[1]}()); break;`,
        );
      } else {
        enc.push(`  for (const v of ${acc} ?? []) w.uint32(${tag(f.id, scalar[0])}).${scalar[1]}(v);`);
        dec.push(`      case ${f.id}: ${acc}.push(r.${scalar[1]}()); break;`);
      }
    } else if (msg) {
      defaults.push(`${k}: null`);
      enc.push(`  if (${acc} != null) encode${msg}(${acc}, w.uint32(${tag(f.id, 2)}).fork()).ldelim();`);
      dec.push(`      case ${f.id}: ${acc} = decode${msg}(r, r.uint32()); break;`);
    } else {
      defaults.push(`${k}: ${scalar[2]}`);
      const present = f.type === 'bytes' ? `${acc}?.length` : acc;
      enc.push(`  if (${present}) w.uint32(${tag(f.id, scalar[0])}).${scalar[1]}(${acc});`);
      dec.push(`      case ${f.id}: ${acc} = r.${scalar[1]}(); break;`);
    }
  }
  return [
    `/** Writes \`${type.fullName.slice(1)}\` \`m\` to \`w\` (default-valued fields omitted). */`,
    `function encode${n}(m: Msg, w: Writer): Writer {`,
    ...enc,
    '  return w;',
    '}',
    '',
    `/** Reads \`${type.fullName.slice(1)}\` (the next \`len\` bytes, or to the end), defaults filled in. */`,
    `function decode${n}(r: Reader, len?: number): Msg {`,
    '  const end = len === undefined ? r.len : r.pos + len;',
    `  const m: Msg = { ${defaults.join(', ')} };`,
    '  while (r.pos < end) {',
    '    const t = r.uint32();',
    '    switch (t >>> 3) {',
    ...dec,
    '      default: r.skipType(t & 7);',
    '    }',
    '  }',
    '  return m;',
    '}',
    '',
  ].join('\n');
}

/** All message types under `ns`, depth first. */
function messageTypes(ns, out = []) {
  for (const o of ns.nestedArray ?? []) {
    if (o instanceof protobuf.Type) out.push(o);
    if (o.nestedArray) messageTypes(o, out);
  }
  return out;
}

/** The TypeScript source of the codec module for the .proto as it is now. @throws Error for unsupported field types. */
export function ipamCodecSource() {
  const r = new protobuf.Root();
  r.loadSync(PROTO_PATH, { keepCase: true });
  r.resolveAll();
  const types = messageTypes(r);
  const names = types.map((t) => t.name);
  const dup = names.find((x, i) => names.indexOf(x) !== i);
  if (dup) throw new Error(`message name ${dup} appears twice: gen-ipam-codec needs unique simple names`);
  return [
    '// GENERATED by scripts/gen-ipam-codec.mjs from proto/ipam.proto. Do not edit.',
    '// Regenerate: node scripts/gen-ipam-codec.mjs (the build does it when stale).',
    '/* eslint-disable */',
    "import protobuf from 'protobufjs/minimal.js';",
    '',
    'type Writer = protobuf.Writer;',
    'type Reader = protobuf.Reader;',
    '// eslint-disable-next-line @typescript-eslint/no-explicit-any',
    'type Msg = Record<string, any>;',
    '',
    ...types.map(messageCode),
    '/** Static codec of one message: `encode` a plain object (proto field names), `decode` bytes into one. */',
    'export interface IpamMessageCodec {',
    '  encode(m: object): Uint8Array;',
    '  decode(b: Uint8Array): Msg;',
    '}',
    '',
    '/** Codec of every message of proto/ipam.proto, by simple message name. */',
    'export const IPAM_CODECS: Record<string, IpamMessageCodec> = {',
    ...types.map(
      (t) =>
        `  ${t.name}: { encode: (m) => encode${t.name}(m as Msg, protobuf.Writer.create()).finish(), decode: (b) => decode${t.name}(protobuf.Reader.create(b)) },`,
    ),
    '};',
    '',
  ].join('\n');
}

/** Rewrites the codec module if it differs; returns true when it changed. */
export function writeIpamCodec() {
  const want = ipamCodecSource();
  let have = '';
  try {
    have = readFileSync(CODEC_PATH, 'utf8');
  } catch {
    /* first run */
  }
  if (have === want) return false;
  writeFileSync(CODEC_PATH, want);
  return true;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--check')) {
    let have = '';
    try {
      have = readFileSync(CODEC_PATH, 'utf8');
    } catch {
      /* missing */
    }
    if (have !== ipamCodecSource()) {
      console.error(`${CODEC_PATH} is out of date with ${PROTO_PATH}: run node scripts/gen-ipam-codec.mjs`);
      process.exit(1);
    }
  } else {
    console.error(writeIpamCodec() ? `wrote ${CODEC_PATH}` : `${CODEC_PATH} is up to date`);
  }
}
