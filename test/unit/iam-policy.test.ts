/**
 * The IAM policy docs/install-eks.md gives operators lists exactly the EC2 actions the
 * code calls: every `new <X>Command(…)` of @aws-sdk/client-ec2 in ipamd's and the CLI's
 * sources (found with TypeScript's parser, not a hand list) is an `ec2:<X>` in the
 * policy, and the policy grants nothing the code never calls.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { fromMarkdown } from 'mdast-util-from-markdown';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Every .ts file under a repository dir (tests excluded). */
function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => path.join(ROOT, dir, f));
}

/** Names `X` of every `new XCommand(…)` / `new m.XCommand(…)` in a file. */
function commandsIn(file: string): string[] {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (n: ts.Node): void => {
    if (ts.isNewExpression(n)) {
      const e = n.expression;
      const name = ts.isIdentifier(e) ? e.text : ts.isPropertyAccessExpression(e) ? e.name.text : '';
      if (name.endsWith('Command')) found.push(name);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

/** The EC2 actions the shipped code calls, as IAM action names. */
async function actionsCalled(): Promise<string[]> {
  const ec2 = (await import('@aws-sdk/client-ec2')) as Record<string, unknown>;
  const names = new Set<string>();
  for (const f of [...sources('ipamd'), ...sources('cli')]) {
    for (const c of commandsIn(f)) if (typeof ec2[c] === 'function') names.add(`ec2:${c.replace(/Command$/, '')}`);
  }
  return [...names].sort();
}

/** The IAM policy documents (JSON code blocks with a Version) of docs/install-eks.md. */
function policies(): { Statement: { Effect: string; Action: string | string[]; Resource: string }[] }[] {
  const tree = fromMarkdown(readFileSync(path.join(ROOT, 'docs/install-eks.md'), 'utf8'));
  return tree.children
    .filter((n) => n.type === 'code' && n.lang === 'json' && n.value.includes('"2012-10-17"'))
    .map((n) => JSON.parse((n as { value: string }).value) as ReturnType<typeof policies>[number]);
}

test('the install guide’s IAM policy lists exactly the EC2 actions the code calls', async () => {
  const called = await actionsCalled();
  assert.ok(called.length >= 8, `found only ${called.join(', ')} in the sources`);
  assert.ok(called.includes('ec2:AssignPrivateIpAddresses') && called.includes('ec2:DescribeNetworkInterfaces'));
  const docs = policies();
  assert.equal(docs.length, 1, 'one IAM policy in docs/install-eks.md');
  const granted = docs[0]!.Statement.flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]));
  assert.deepEqual([...granted].sort(), called, 'policy actions vs `new …Command()` in ipamd/ and cli/');
  for (const s of docs[0]!.Statement) assert.equal(s.Effect, 'Allow');
});
