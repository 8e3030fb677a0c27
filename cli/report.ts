// `smcdump --report FILE.html`: the self-contained HTML report, written at the end of -r or -i.

import { writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { Tracker } from '../dissectors/tracker/tracker.js';
import { ReportRecorder } from '../dissectors/render/report/recorder.js';
import { renderReport } from '../dissectors/render/report/html.js';
import { CliError } from './output.js';

export { ReportRecorder };

/** Write the report of a finished tracker; `what` names the input (file or interface). */
export function writeReport(file: string, t: Tracker, rec: ReportRecorder, what: string): void {
  const html = renderReport(t, rec, { title: `smcdump report: ${basename(what)}`, generator: `smcdump (smcscope) --report, ${what}` });
  try { writeFileSync(file, html); } catch (e) { throw new CliError(`cannot write ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`); }
}
