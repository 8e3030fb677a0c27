#!/usr/bin/env node
import { run } from '../smcdump.js';

run(process.argv);
