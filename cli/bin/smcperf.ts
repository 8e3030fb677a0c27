#!/usr/bin/env node
import { run } from '../smcperf.js';

run(process.argv);
