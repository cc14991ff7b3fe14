/**
 * The one CNI error catalogue (cni-plugin/error-catalogue.ts) against what uses it
 * (docs/design.md#cni-errors): the docs table is the rendered catalogue; the plugin's
 * TypeScript makes its errors only through the catalogue and uses every plugin entry; the
 * shim's C source answers exactly the shim entries (code and message); and the ADD
 * mapping sends each cause ipamd tags to a code-11 entry.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CNI_ERRORS, renderCniErrorTable, type CniErrorEntry } from '../../cni-plugin/error-catalogue.js';
import { addFailure } from '../../cni-plugin/add.js';
import { IpamdCallError } from '../../proto/ipamd-api.js';
import { GrpcStatus } from '../../proto/grpc-status.js';
import { IpamdCause, tagCause } from '../../proto/ipamd-cause.js';
import { parseCniArgs } from '../../cni-plugin/env.js';
import { CniError } from '../../cni-plugin/errors.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const entries = Object.entries(CNI_ERRORS as Record<string, CniErrorEntry>);

test('the docs table is the rendered catalogue', () => {
  const doc = readFileSync(path.join(ROOT, 'docs/design.md'), 'utf8');
  const m = /<!-- cni-error-table:start -->\n([\s\S]*?)\n<!-- cni-error-table:end -->/.exec(doc);
  assert.ok(m, 'docs/design.md has the cni-error-table markers');
  assert.equal(m[1], renderCniErrorTable(), 'table out of date: npm run build && node scripts/cni-error-table.mjs');
});

test('the plugin makes CNI errors only through the catalogue, and uses every plugin entry', () => {
  const dir = path.join(ROOT, 'cni-plugin');
  const sources = readdirSync(dir)
    .filter((f) => f.endsWith('.ts') && f !== 'errors.ts' && f !== 'error-catalogue.ts')
    .map((f) => ({ f, text: readFileSync(path.join(dir, f), 'utf8') }));
  for (const { f, text } of sources) {
    assert.doesNotMatch(text, /new CniError\(/, `${f} builds a CniError outside the catalogue`);
    assert.doesNotMatch(text, /CniCode\.\w+,\s*['`"]/, `${f} pairs a code with a message outside the catalogue`);
  }
  const all = sources.map((s) => s.text).join('\n');
  const unused = entries
    .filter(([id, e]) => e.by === 'plugin' && !all.includes(`'${id}'`) && !all.includes(`CNI_ERRORS.${id}`))
    .map(([id]) => id);
  assert.deepEqual(unused, [], 'catalogue entries no code path answers');
});

test("the shim's C source answers exactly the shim entries, code and message", () => {
  const c = readFileSync(path.join(ROOT, 'cni-plugin/shim/eni-ipam-shim.c'), 'utf8');
  const enumBody = /enum \{([^}]*)\};/.exec(c)![1]!;
  const codes = new Map([...enumBody.matchAll(/(\w+) = (\d+)/g)].map((m) => [m[1]!, Number(m[2])] as const));
  const literal = [...c.matchAll(/cni_error\((\w+),\s*"((?:[^"\\]|\\.)*)"/g)].map((m) => ({
    code: codes.get(m[1]!),
    msg: m[2]!.replace(/\\"/g, '"'),
  }));
  // Ternaries choosing among literals (the missing-variables message).
  for (const m of c.matchAll(/cni_error\((\w+),[^;]*?\?[^;]*;/g))
    for (const s of m[0].matchAll(/"(missing [^"]*)"/g)) literal.push({ code: codes.get(m[1]!), msg: s[1]! });
  const shim = entries.filter(([, e]) => e.by === 'shim');
  for (const l of literal)
    assert.ok(
      shim.some(([, e]) => e.code === l.code && e.msg === l.msg),
      `shim answers ${l.code} ${JSON.stringify(l.msg)}: add it to the catalogue`,
    );
  for (const [id, e] of shim) {
    if (e.cFormat) {
      assert.ok(c.includes(`"${e.cFormat}"`), `${id}: format ${e.cFormat} not in the shim`);
      continue;
    }
    if (e.msg === '{reason}') continue; // relayed from ipamd's F answer
    assert.ok(
      literal.some((l) => l.code === e.code && l.msg === e.msg),
      `${id}: the shim never answers ${e.code} ${JSON.stringify(e.msg)}`,
    );
  }
});

test('every cause ipamd tags maps to a try-again-later error naming it', () => {
  for (const cause of Object.values(IpamdCause)) {
    const e = addFailure(new IpamdCallError('AddNetwork', GrpcStatus.UNAVAILABLE, tagCause(cause, 'why')));
    assert.equal(e.code, 11, cause);
    assert.match(e.details, /why$/, `${cause}: details carry ipamd's message`);
    assert.doesNotMatch(e.details, /\[/, `${cause}: the tag is not echoed`);
  }
  const checkpoint = addFailure(
    new IpamdCallError('AddNetwork', GrpcStatus.UNAVAILABLE, tagCause(IpamdCause.Checkpoint, 'ENOSPC')),
  );
  assert.match(checkpoint.msg, /checkpoint/);
  const unverified = addFailure(
    new IpamdCallError('AddNetwork', GrpcStatus.RESOURCE_EXHAUSTED, tagCause(IpamdCause.Unverified, '27 held')),
  );
  assert.match(unverified.msg, /unverified.*eni-ipam audit/);
  assert.equal(addFailure(new IpamdCallError('AddNetwork', GrpcStatus.INTERNAL, 'boom')).code, 100);
  assert.equal(addFailure(new Error('ECONNREFUSED')).code, 11);
});

test('a CNI_ARGS value with a control character is refused with code 4 naming the key', () => {
  for (const bad of ['a\nb', 'a\rb', 'a\u0000b', 'a\u007fb', 'a\tb']) {
    assert.throws(
      () => parseCniArgs(`K8S_POD_NAME=p;K8S_POD_NAMESPACE=${bad};K8S_POD_UID=u`),
      (e: unknown) => e instanceof CniError && e.code === 4 && e.msg.includes('"K8S_POD_NAMESPACE"'),
      JSON.stringify(bad),
    );
  }
  assert.throws(
    () => parseCniArgs('IgnoreUnknown=1;X\nY=1'),
    (e: unknown) => e instanceof CniError && e.code === 4,
  );
  assert.equal(parseCniArgs('K8S_POD_NAMESPACE=kube-system').podNamespace, 'kube-system');
});
