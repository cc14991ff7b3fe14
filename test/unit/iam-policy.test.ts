/**
 * The IAM policies of docs/iam/ (one per IP family; docs/install-eks.md#1-the-iam-policy)
 * grant exactly the EC2 actions the code calls: every `new <X>Command(…)` of
 * @aws-sdk/client-ec2 in ipamd's and the CLI's sources (found with TypeScript's parser, not
 * a hand list), plus `ec2:CreateTags` wherever a create call tags on creation
 * (`TagSpecifications`: IAM authorizes that as CreateTags on the new resource), is granted by
 * the policy of some family, and together they grant nothing else. `CreateTags` is scoped to
 * network interfaces and to tagging on creation; no policy lets ipamd give back a node's
 * IPv6 /80; the guide shows the IPv4 policy as the file has it. That each family's policy is
 * enough for ipamd in that mode, and that each action it grants is used, is shown against
 * the simulated cloud enforcing it (test/integration/iam-policy-family.test.ts).
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { fromMarkdown } from 'mdast-util-from-markdown';
import ts from 'typescript';
import type { IamPolicy, IamStatement } from '../../sim/iam.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The create calls that tag on creation, and the IAM action that authorizes the tagging. */
const TAG_ON_CREATE = 'ec2:CreateTags';

/** Every .ts file under a repository dir (tests excluded). */
function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => path.join(ROOT, dir, f));
}

/** Names `X` of every `new XCommand(…)` / `new m.XCommand(…)` in a file, and whether any tags on creation. */
function commandsIn(file: string): { names: string[]; tagsOnCreate: boolean } {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const names: string[] = [];
  let tagsOnCreate = false;
  const visit = (n: ts.Node): void => {
    if (ts.isNewExpression(n)) {
      const e = n.expression;
      const name = ts.isIdentifier(e) ? e.text : ts.isPropertyAccessExpression(e) ? e.name.text : '';
      if (name.endsWith('Command')) {
        names.push(name);
        const arg = n.arguments?.[0];
        if (
          arg &&
          ts.isObjectLiteralExpression(arg) &&
          arg.properties.some((p) => p.name && ts.isIdentifier(p.name) && p.name.text === 'TagSpecifications')
        )
          tagsOnCreate = true;
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return { names, tagsOnCreate };
}

/** The IAM actions the shipped code needs: the EC2 commands it sends, and CreateTags when it tags on creation. */
async function actionsCalled(): Promise<string[]> {
  const ec2 = (await import('@aws-sdk/client-ec2')) as Record<string, unknown>;
  const names = new Set<string>();
  for (const f of [...sources('ipamd'), ...sources('cli')]) {
    const found = commandsIn(f);
    for (const c of found.names) if (typeof ec2[c] === 'function') names.add(`ec2:${c.replace(/Command$/, '')}`);
    if (found.tagsOnCreate) names.add(TAG_ON_CREATE);
  }
  return [...names].sort();
}

const FAMILIES = ['ipv4', 'ipv6', 'dual'] as const;
const policyFile = (family: string) => path.join(ROOT, 'docs', 'iam', `eni-ipam-${family}.json`);
const readPolicy = (family: string) => JSON.parse(readFileSync(policyFile(family), 'utf8')) as IamPolicy;
const statementsOf = (p: IamPolicy): IamStatement[] => (Array.isArray(p.Statement) ? p.Statement : [p.Statement]);
const asList = (v: string | string[]) => (Array.isArray(v) ? v : [v]);
const actionsOf = (p: IamPolicy) => [...new Set(statementsOf(p).flatMap((s) => asList(s.Action)))].sort();

test('together the three policies grant exactly the EC2 actions the code calls', async () => {
  const called = await actionsCalled();
  assert.ok(called.length >= 8, `found only ${called.join(', ')} in the sources`);
  assert.ok(called.includes('ec2:AssignPrivateIpAddresses') && called.includes('ec2:DescribeNetworkInterfaces'));
  assert.ok(called.includes(TAG_ON_CREATE), 'CreateNetworkInterface tags on creation (TagSpecifications)');
  const granted = [...new Set(FAMILIES.flatMap((f) => actionsOf(readPolicy(f))))].sort();
  assert.deepEqual(granted, called, 'policy actions vs `new …Command()` in ipamd/ and cli/');
  assert.ok(!called.includes('ec2:UnassignIpv6Addresses'), 'ipamd never gives back a node’s /80');
});

test('dual grants what IPv4 and IPv6 grant; IPv6 grants no ENI lifecycle and no release', () => {
  const [v4, v6, dual] = FAMILIES.map((f) => actionsOf(readPolicy(f)));
  assert.deepEqual(dual, [...new Set([...v4!, ...v6!])].sort());
  for (const a of [
    'ec2:CreateNetworkInterface',
    'ec2:DeleteNetworkInterface',
    'ec2:DetachNetworkInterface',
    'ec2:UnassignPrivateIpAddresses',
    TAG_ON_CREATE,
  ])
    assert.ok(!v6!.includes(a), `the IPv6 policy grants ${a}: IPv6 mode creates no ENI and releases nothing`);
  assert.ok(v6!.includes('ec2:AssignIpv6Addresses') && !v4!.includes('ec2:AssignIpv6Addresses'));
});

test('every statement allows, on "*" except CreateTags, which is scoped to tagging a new network interface', () => {
  for (const f of FAMILIES) {
    const p = readPolicy(f);
    assert.equal(p.Version, '2012-10-17', f);
    for (const s of statementsOf(p)) {
      assert.equal(s.Effect, 'Allow', `${f} ${s.Sid}`);
      assert.ok(!asList(s.Action).some((a) => a.includes('*')), `${f} ${s.Sid}: no wildcard actions`);
      if (asList(s.Action).includes(TAG_ON_CREATE)) {
        assert.deepEqual(asList(s.Action), [TAG_ON_CREATE], `${f} ${s.Sid}: CreateTags in a statement of its own`);
        assert.deepEqual(asList(s.Resource), ['arn:aws:ec2:*:*:network-interface/*'], `${f} ${s.Sid}`);
        assert.deepEqual(
          s.Condition,
          { StringEquals: { 'ec2:CreateAction': 'CreateNetworkInterface' } },
          `${f} ${s.Sid}`,
        );
      } else {
        assert.equal(s.Resource, '*', `${f} ${s.Sid}`);
        assert.equal(s.Condition, undefined, `${f} ${s.Sid}`);
      }
    }
  }
});

test('the install guide shows the IPv4 policy as docs/iam/eni-ipam-ipv4.json has it', () => {
  const tree = fromMarkdown(readFileSync(path.join(ROOT, 'docs/install-eks.md'), 'utf8'));
  const shown = tree.children
    .filter((n) => n.type === 'code' && n.lang === 'json' && n.value.includes('"2012-10-17"'))
    .map((n) => JSON.parse((n as { value: string }).value) as IamPolicy);
  assert.equal(shown.length, 1, 'one IAM policy shown in docs/install-eks.md');
  assert.deepEqual(shown[0], readPolicy('ipv4'));
});
