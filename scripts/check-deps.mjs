#!/usr/bin/env node
// Every package the code imports is declared in package.json (run by `npm run lint`).
// Shipped code (ipamd/, cni-plugin/, cli/, proto/, netfacts/, nodefs/, sim/) must find it in `dependencies`;
// tests, benches, the demo and scripts may also use `devDependencies`. Node built-ins
// (with or without `node:`) are always allowed. Exit 1 with one line per undeclared import.
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { execFileSync } from 'node:child_process';
import ts from 'typescript';

const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
const prod = new Set(Object.keys(pkg.dependencies ?? {}));
const dev = new Set(Object.keys(pkg.devDependencies ?? {}));
const builtins = new Set(builtinModules);
const SHIPPED = /^(ipamd|cni-plugin|cli|proto|netfacts|nodefs|sim)\//;

const files = execFileSync(
  'git',
  ['ls-files', '-co', '--exclude-standard', '*.ts', '*.mts', '*.cts', '*.js', '*.mjs', '*.cjs'],
  {
    encoding: 'utf8',
  },
)
  .split('\n')
  .filter((f) => f && !f.startsWith('dist/') && !f.includes('node_modules/') && !/\.generated\./.test(f));

/** The package name of a bare specifier (`@scope/name/sub` → `@scope/name`), or null for paths and built-ins. */
function packageOf(spec) {
  if (spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('node:')) return null;
  const parts = spec.split('/');
  const name = spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  return builtins.has(name) ? null : name;
}

const problems = [];
for (const file of files) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    continue; // listed but deleted in the work tree
  }
  // TypeScript's own scanner: static and dynamic imports, re-exports and require() calls.
  const { importedFiles } = ts.preProcessFile(text, true, true);
  for (const { fileName } of importedFiles) {
    const name = packageOf(fileName);
    if (name === null || name === pkg.name) continue;
    const shipped = SHIPPED.test(file);
    if (prod.has(name)) continue;
    if (dev.has(name)) {
      if (!shipped) continue;
      problems.push(
        `${file}: imports '${name}', declared only in devDependencies (shipped code needs it in dependencies)`,
      );
    } else {
      problems.push(`${file}: imports '${name}', not declared in package.json`);
    }
  }
}
for (const p of [...new Set(problems)]) console.error(p);
if (problems.length > 0) process.exit(1);
console.log(`check-deps: ${files.length} files, every imported package is declared`);
