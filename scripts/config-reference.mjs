#!/usr/bin/env node
// Writes the configuration reference from ipamd's own spec (ipamd/config-reference.ts),
// so the docs and the chart cannot drift from the code: docs/configuration.md (every
// variable ipamd reads, the aws-node table) and the `env` property of
// charts/eni-ipam/values.schema.json (and `extraEnv`, and the checks both share under
// `definitions.envCheck`). test/unit/config-reference.test.ts fails when the
// committed files differ. Usage: npm run build && node scripts/config-reference.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { configSpecs } from '../dist/ipamd/config.js';
import { chartSchemaParts, renderConfigReference, verdictCounts } from '../dist/ipamd/config-reference.js';

const doc = new URL('../docs/configuration.md', import.meta.url);
writeFileSync(doc, renderConfigReference(configSpecs()));

const schemaFile = new URL('../charts/eni-ipam/values.schema.json', import.meta.url);
const schema = JSON.parse(readFileSync(schemaFile, 'utf8'));
const parts = chartSchemaParts(configSpecs());
schema.definitions = { ...schema.definitions, envCheck: parts.envCheck };
schema.properties.env = parts.env;
schema.properties.extraEnv = parts.extraEnv;
writeFileSync(schemaFile, `${JSON.stringify(schema, null, 2)}\n`);

const n = verdictCounts();
console.log(
  `docs/configuration.md: ${configSpecs().length} variables; aws-node: ${n.honoured} honoured, ${n.refused} refused, ${n.warned} warned; values.schema.json env and extraEnv typed`,
);
