/**
 * Bad input to the built CLI, no ipamd needed: each is ONE line on stderr naming the
 * input and what is accepted, exit code 2 (usage) or 3 (nothing listening), no stack trace.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../helpers/cli-run.js';

const CASES: Array<{ args: string[]; code: number; says: RegExp }> = [
  { args: ['status', '--no-such-flag'], code: 2, says: /unknown flag: --no-such-flag \(see eni-ipam --help\)$/ },
  { args: ['stauts'], code: 2, says: /unknown command "stauts"\. Did you mean status\?/ },
  { args: [], code: 2, says: /name a command/ },
  { args: ['status', '--output', 'xml'], code: 2, says: /output.*"xml".*"table", "wide", "json", "yaml"/ },
  { args: ['status', '--timeout', 'abc'], code: 2, says: /--timeout "abc" is invalid: expected a whole number of ms/ },
  {
    args: ['status', '--introspection', 'nonsense'],
    code: 2,
    says: /--introspection "nonsense" is invalid: expected host:port/,
  },
  {
    args: ['status', '--socket', 'rel.sock'],
    code: 2,
    says: /--socket "rel\.sock" is invalid: expected an absolute path/,
  },
  {
    args: ['max-pods', '--instance-type', 'c5.xlarg'],
    code: 2,
    says: /unknown instance type "c5\.xlarg": .*the closest listed one is c5\.xlarge.*refresh-instance-limits/,
  },
  { args: ['pods', 'a/b/c'], code: 2, says: /pod filter "a\/b\/c" is invalid: expected NAMESPACE\/NAME/ },
  {
    args: ['max-pods', '--instance-type', 'm5.large', '--max-pods-cap', 'x'],
    code: 2,
    says: /--max-pods-cap "x" is invalid/,
  },
];

for (const c of CASES) {
  test(`eni-ipam ${c.args.join(' ') || '(nothing)'} → exit ${c.code}, one line`, async () => {
    const r = await runCli(c.args);
    assert.equal(r.code, c.code, r.stderr);
    assert.equal(r.stdout, '');
    const lines = r.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, /^eni-ipam: /);
    assert.match(lines[0]!, c.says);
  });
}

test('max-pods --output json is one document', async () => {
  const r = await runCli(['max-pods', '--instance-type', 't3.medium', '--custom-networking', '-o', 'json']);
  assert.equal(r.code, 0);
  assert.deepEqual(JSON.parse(r.stdout), {
    instanceType: 't3.medium',
    maxEnis: 3,
    ipv4PerEni: 6,
    vcpus: 2,
    podEnis: 2,
    perSlot: 1,
    formula: 12,
    eksCap: 110,
    maxPods: 12,
    explain: '2 × (6 − 1) + 2 = 12',
  });
});

test('max-pods with no --instance-type asks IMDS, and says so when it does not answer (exit 5)', async () => {
  const r = await runCli(['max-pods', '--timeout', '500'], { AWS_EC2_METADATA_SERVICE_ENDPOINT: 'http://127.0.0.1:1' });
  assert.equal(r.code, 5, r.stderr);
  assert.equal(r.stderr.trimEnd().split('\n').length, 1);
  assert.match(r.stderr, /^eni-ipam: no --instance-type given and IMDS at http:\/\/127\.0\.0\.1:1 did not answer/);
});

test('status with nothing listening answers from the other sources, names them, and exits 3 with one line', async () => {
  const r = await runCli(['status', '--introspection', '127.0.0.1:1', '--checkpoint', '/nonexistent/ipam.json'], {
    AWS_EC2_METADATA_SERVICE_ENDPOINT: 'http://127.0.0.1:1',
  });
  assert.equal(r.code, 3, r.stderr);
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(
    lines[0]!,
    /^eni-ipam: cannot reach ipamd introspection \(.*http:\/\/127\.0\.0\.1:1\): answered from the kernel instead/,
  );
  assert.match(r.stdout, /^ipamd UNREACHABLE/);
  assert.match(r.stdout, /^sources read: the kernel \(this network namespace\) \(\d+ pod routes\)$/m);
  assert.match(
    r.stdout,
    /^not read: ipamd \(.*\); \/nonexistent\/ipam\.json: unreadable: checkpoint \/nonexistent\/ipam\.json does not exist/m,
  );
});
