#!/usr/bin/env node
import { run } from '../smcping.js';

run(process.argv);
