#!/usr/bin/env node
// Runs the TypeScript CLI through tsx, so `npm ci` is the only install step.
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
