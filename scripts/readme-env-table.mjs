#!/usr/bin/env node
// Regenerates the README's configuration table from ipamd's own schema
// (describeEnvVars in ipamd/config.ts), so the docs cannot drift from the code.
// Usage: npm run build && node scripts/readme-env-table.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { describeEnvVars } from '../dist/ipamd/config.js';

const readme = new URL('../README.md', import.meta.url);
const text = readFileSync(readme, 'utf8');
const esc = (s) => String(s).replace(/\|/g, '\\|');
const rows = describeEnvVars().map((v) => `| \`${v.name}\` | ${esc(v.default) || '(unset)'} | ${esc(v.description)} |`);
const table = ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
const out = text.replace(
  /<!-- env-table:start -->[\s\S]*<!-- env-table:end -->/,
  `<!-- env-table:start -->\n${table}\n<!-- env-table:end -->`,
);
writeFileSync(readme, out);
console.log(`README: ${rows.length} variables`);
