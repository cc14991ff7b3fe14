/**
 * One spec, three gates (docs/configuration.md): for every variable, ipamd's parse and the
 * chart's values.schema.json (compiled here with ajv, draft 7, as helm compiles it with
 * santhosh-tekuri/jsonschema) accept exactly the same values, strings and YAML numbers and
 * booleans alike (as the chart renders them), over a corpus of good and bad values. The real
 * helm is held to the same in test/chart/chart-config-gates.test.ts, case by case.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Ajv } from 'ajv';
import { checkAwsNodeVars } from '../../ipamd/aws-node-check.js';
import { AWS_NODE_VARS } from '../../ipamd/aws-node-vars.js';
import { configSpecs } from '../../ipamd/config.js';
import { isBlank } from '../../ipamd/config-patterns.js';

const schema = JSON.parse(
  readFileSync(new URL('../../../charts/eni-ipam/values.schema.json', import.meta.url), 'utf8'),
);
const ajv = new Ajv({ strict: false, allErrors: false });
// The env and extraEnv values with the checks they share; the rest of values.schema.json is about other values.
const validate = ajv.compile({
  type: 'object',
  definitions: schema.definitions,
  properties: { env: schema.properties.env, extraEnv: schema.properties.extraEnv },
});

/** What the chart renders for a YAML value (templates/_helpers.tpl eni-ipam.envText: toJson for numbers). */
const rendered = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

const STRINGS = [
  ...['', ' ', '0', '1', '2', '-1', '01', '007', '1.5', '.5', '5.', '1e3', '+5', '0x10', '9001', '9002', '576', '575'],
  ...['true', 'TRUE', 'True', 'tRuE', 't', 'T', 'f', 'F', 'FALSE', 'False', 'yes', 'no', 'on', ' true ', '\u00a0true'],
  ...['abc', '10.0.0.0/8', '10.0.0.0/33', '10.0.0.0/8,,192.168.0.0/16', ' 10.0.0.0/8 , 172.16.0.0/12 ', '010.0.0.0/8'],
  ...[
    '10.0.0.0/08',
    '1.2.3.4/32,',
    '300s',
    '301s',
    '300.0001s',
    '5m',
    '6m',
    '596h',
    '597h',
    '0.5ms',
    '0.4ms',
    '0.0001',
  ],
  ...['0s', '0', '2145600', '2145600.5', '1.5h', '500ms', '5 m', '{}', '{"a":"b"}', '[1]', 'null', '"x"'],
  ...['http://169.254.169.254', 'https://ec2.us-east-1.amazonaws.com', 'http://[fd00:ec2::254]', 'http://[1:2]'],
  ...['http://1.2.3.999', 'http://a.0x1', 'HTTP://localhost:8080/x?y', 'ftp://x', 'http://x:65536', 'http://x y'],
  ...[
    ':61678',
    '127.0.0.1:61679',
    '[::1]:80',
    '127.0.0.1:65536',
    'host',
    ':080',
    'eni',
    'eth',
    ' eth ',
    'ENI',
    'abcde',
  ],
  ...['k8s.amazonaws.com/eniConfig', 'topology.kubernetes.io/zone', 'Bad_Prefix/x', '/x', 'x/', `${'a'.repeat(254)}/x`],
  ...['/var/run/x.sock', 'unix:///run/x.sock', 'unix://relative', '/', '/proc/x', '/proc', '/dev/null', '/var/x/'],
  ...['stdout', 'relative/path', '/run/netns/node', '100M', '100m', '0M', '12345678K', '0x80', '0X80', '0x0', '0o200'],
  ...['0b1', '0x100000000', '4294967295', '4294967296', '0200', 'A,,B', 'A,', 'WARM_ENI_TARGET, AWS_VPC_ENI_MTU', '1A'],
  ...['none', 'PRNG', 'hashrandom', 'debug', 'Trace', 'json', 'pretty', 'standard', 'strict', 'x'.repeat(257)],
  `/${'s'.repeat(106)}`,
  `/${'s'.repeat(107)}`,
  `/${'é'.repeat(10)}`,
];
const OTHERS: unknown[] = [0, 1, 5, 1.5, 0.000001, 1e-7, 300, 301, 9001, 4294967295, 4294967296, 1e21, true, false];

/** Whether the chart takes a YAML number or boolean for `name` (a number, duration, boolean or mark setting). */
function takesNonStrings(name: string): boolean {
  return [0, 1, 1.5, true].some((v) => validate({ env: { [name]: v } }));
}

test('ipamd and the chart schema accept the same values of every variable', () => {
  const mismatches: string[] = [];
  const specs = configSpecs();
  const spec = new Map(specs.map((s) => [s.name, s]));
  // ADDITIONAL_ENI_TAGS is JSON in a string: the chart's template checks it, not its schema (the helm test does).
  const names = [...new Set([...specs.map((s) => s.name), ...AWS_NODE_VARS.map((r) => r.name)])].filter(
    (n) => n !== 'ADDITIONAL_ENI_TAGS',
  );
  let checked = 0;
  for (const name of names) {
    for (const v of [...STRINGS, ...OTHERS]) {
      const text = rendered(v);
      const chart = validate({ env: { [name]: v } });
      const s = spec.get(name);
      let ipamd: boolean;
      if (isBlank(text)) ipamd = true;
      else if (s) ipamd = s.field.safeParse(text).success;
      else {
        try {
          checkAwsNodeVars({ [name]: text });
          ipamd = true;
        } catch {
          ipamd = false;
        }
      }
      checked++;
      // A YAML number or boolean where the setting is text is refused by type (quote it): ipamd never sees it.
      if (typeof v !== 'string' && !chart && !takesNonStrings(name)) continue;
      if (chart !== ipamd)
        mismatches.push(
          `${name}=${JSON.stringify(v)}: chart ${chart ? 'accepts' : 'refuses'}, ipamd ${ipamd ? 'accepts' : 'refuses'}`,
        );
      // An extraEnv entry with a literal value is held to the same check (strings only: a container's env values are).
      if (typeof v === 'string' && validate({ extraEnv: [{ name, value: v }] }) !== chart)
        mismatches.push(`extraEnv ${name}=${JSON.stringify(v)}: differs from env`);
    }
  }
  assert.deepEqual(mismatches, [], `${mismatches.length} of ${checked} disagree`);
  assert.ok(checked > 5000, `${checked} checked`);
});
