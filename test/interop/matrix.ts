// The interop matrix (provider × role × case × result) from the TAP output of an interop run:
//   npx ava --config ava.interop.config.js --tap > interop.tap      (.ci/run writes interop.tap)
//   node --import tsx test/interop/matrix.ts interop.tap             (prints the Markdown table)
//   node --import tsx test/interop/matrix.ts interop.tap --write docs/endpoint.md
// --write replaces the table between <!-- interop-matrix:begin --> and <!-- interop-matrix:end -->.
// Titles name the provider and the roles: "ibverbs client → kernel server: CASE", "kernel client →
// our server: CASE" (our = uroce on the host side), "ibverbs ↔ kernel: CASE"; tests of the
// kernel alone (smoke, tools) are listed as provider "kernel ↔ kernel".
import { readFileSync, writeFileSync } from 'node:fs';

const [tapFile = 'interop.tap', ...rest] = process.argv.slice(2);
const writeTo = rest[0] === '--write' ? rest[1] : undefined;
const lines = readFileSync(tapFile, 'utf8').split('\n');

interface Row { provider: string; role: string; kase: string; result: string; lab: string }
const rows: Row[] = [];
for (let i = 0; i < lines.length; i++) {
  const m = /^(ok|not ok) \d+ - (.*?)(?: # (SKIP|TODO).*)?$/.exec(lines[i]!);
  if (!m) continue;
  const title = m[2]!.replace(/^\S+\.interop › /, '');
  let lab = '';
  for (let j = i + 1; j < lines.length && lines[j]!.startsWith('#'); j++) {
    const l = /lab run (\d+) s/.exec(lines[j]!) ?? /: (?:PASS|FAIL)[^\n]* in (\d+)(?:\.\d)?s/.exec(lines[j]!);
    if (l) { lab = `${l[1]} s`; break; }
  }
  const prov = (w: string): string => (w === 'our' || w === 'uroce' ? 'uroce (host side)' : w === 'ibverbs' ? 'ibverbs (rxe0 in a guest)' : w);
  let r: Row;
  const c = /^(our|ibverbs|uroce) client → kernel server: (.*)$/.exec(title);
  const s = /^kernel client → (our|ibverbs|uroce) server: (.*)$/.exec(title);
  const b = /^(our|ibverbs|uroce) ↔ kernel: (.*)$/.exec(title);
  if (c) r = { provider: prov(c[1]!), role: 'our client → kernel server', kase: c[2]!, result: '', lab };
  else if (s) r = { provider: prov(s[1]!), role: 'kernel client → our server', kase: s[2]!, result: '', lab };
  else if (b) r = { provider: prov(b[1]!), role: 'both', kase: b[2]!, result: '', lab };
  else r = { provider: 'kernel ↔ kernel', role: '—', kase: title, result: '', lab };
  r.result = m[3] ? m[3].toLowerCase() : m[1] === 'ok' ? 'pass' : '**FAIL**';
  rows.push(r);
}
const esc = (x: string): string => x.replace(/\|/g, '\\|');
const table = ['| provider | role | case | result | lab run |', '|---|---|---|---|---|',
  ...rows.map((r) => `| ${esc(r.provider)} | ${esc(r.role)} | ${esc(r.kase)} | ${r.result} | ${r.lab} |`)].join('\n');
if (!writeTo) { console.log(table); process.exit(0); }
const doc = readFileSync(writeTo, 'utf8');
const re = /(<!-- interop-matrix:begin -->\n)[\s\S]*?(<!-- interop-matrix:end -->)/;
if (!re.test(doc)) { console.error(`${writeTo}: no <!-- interop-matrix:begin/end --> markers`); process.exit(1); }
writeFileSync(writeTo, doc.replace(re, `$1${table}\n$2`));
console.log(`${writeTo}: interop matrix, ${rows.length} rows from ${tapFile}`);
