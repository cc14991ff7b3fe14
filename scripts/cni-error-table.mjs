#!/usr/bin/env node
// Regenerates the CNI error table in docs/design.md (#cni-errors) from the one catalogue
// in the code (cni-plugin/error-catalogue.ts), so the docs cannot drift from the code;
// test/unit/cni-error-catalogue.test.ts fails when they differ.
// Usage: npm run build && node scripts/cni-error-table.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { renderCniErrorTable } from '../dist/cni-plugin/error-catalogue.js';

const doc = new URL('../docs/design.md', import.meta.url);
const text = readFileSync(doc, 'utf8');
const out = text.replace(
  /<!-- cni-error-table:start -->[\s\S]*<!-- cni-error-table:end -->/,
  `<!-- cni-error-table:start -->\n${renderCniErrorTable()}\n<!-- cni-error-table:end -->`,
);
writeFileSync(doc, out);
console.log('docs/design.md: CNI error table rewritten');
