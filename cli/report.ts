// `smcdump --report FILE.html`: the self-contained HTML report, written at the end of -r or -i.

import { writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { Tracker } from '../dissectors/tracker/tracker.js';
import { ReportRecorder } from '../dissectors/render/report/recorder.js';
import { renderReport } from '../dissectors/render/report/html.js';
import { CliError } from './output.js';

export { ReportRecorder };

/** Write the report of a finished tracker; `what` names the input (files merged by -r, or an interface). */
export function writeReport(file: string, t: Tracker, rec: ReportRecorder, what: string | string[]): void {
  const list = Array.isArray(what) ? what : [what];
  const html = renderReport(t, rec, { title: `smcdump report: ${list.map((w) => basename(w)).join(' + ')}`, generator: `smcdump (smcscope) --report, ${list.join(', ')}` });
  try { writeFileSync(file, html); } catch (e) { throw new CliError(`cannot write ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`); }
}
