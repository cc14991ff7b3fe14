#!/usr/bin/env node
/**
 * eni-ipamd: the per-node IP address manager daemon's entry point. Runs ipamd from the
 * one-file bundle and its V8 code cache when the build made them (bundle-loader.ts), else
 * from the ES modules; ipamd-main.ts is the composition root.
 */
import './v8-flags.js';
import { startIpamd } from './bundle-loader.js';

void startIpamd();
