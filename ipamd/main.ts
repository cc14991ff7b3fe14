#!/usr/bin/env node
/**
 * eni-ipamd: the per-node IP address manager daemon's entry point. Runs ipamd from the
 * one-file bundle and its V8 code cache when the build made them (bundle-loader.ts), else
 * from the ES modules; ipamd-main.ts is the composition root. `eni-ipamd version` prints
 * the version and the Node.js version and exits.
 */
import './v8-flags.js';
import { startIpamd } from './bundle-loader.js';
import { versionLine } from './version.js';

// `eni-ipamd version` (or --version): one line, nothing started.
if (process.argv[2] === 'version' || process.argv[2] === '--version')
  process.stdout.write(`${versionLine('eni-ipamd')}\n`);
else void startIpamd();
