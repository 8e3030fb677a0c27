// smcdump: tcpdump for SMC-R. Reads pcap/pcapng, prints one line per frame that speaks SMC
// (CLC, LLC, CDC, RDMA WRITE, TCP option 254), a field tree with -V, or JSON lines.

import { Command, InvalidArgumentError, Option } from 'commander';
import { openCapture } from '../capture/reader.js';
import { FrameDecoder, frameProtoMask, PROTO_BIT, type SmcProto } from '../dissectors/frame.js';
import { renderLine, type TimeFormat } from '../dissectors/render/line.js';
import { renderTree } from '../dissectors/render/verbose.js';
import { renderJson } from '../dissectors/render/json.js';
import { CliError, die, makeChalk, Out } from './output.js';

const PROTOS: SmcProto[] = ['tcpopt', 'clc', 'llc', 'cdc', 'rdma', 'roce'];

function intArg(name: string, min: number, max: number) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return n;
  };
}

function collectPort(v: string, prev: number[]): number[] { return [...prev, intArg('port', 1, 65535)(v)]; }

function protoList(v: string): SmcProto[] {
  const list = v.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
  for (const p of list) if (!PROTOS.includes(p as SmcProto)) throw new InvalidArgumentError(`unknown protocol "${p}" (choose from ${PROTOS.join(', ')})`);
  return list as SmcProto[];
}

export function buildProgram(): Command {
  const p = new Command('smcdump');
  p.description('Decode SMC-R traffic (TCP option 254, CLC, RoCE LLC/CDC/RDMA WRITE) from capture files, tcpdump-style.')
    .usage('-r FILE [options]')
    .option('-r, --read <file>', 'read frames from a pcap or pcapng file')
    .addOption(new Option('-i, --interface <iface>', 'live capture (not available yet)').hideHelp())
    .option('-c, --count <n>', 'stop after N frames', intArg('count', 1, Number.MAX_SAFE_INTEGER))
    .option('-n', 'do not resolve addresses or ports (smcdump never does; accepted for tcpdump habits)')
    .option('-v, --verbose', 'print each issue under its frame')
    .option('-V, --tree', 'print the full field tree with byte offsets and a hex dump')
    .option('--json', 'one JSON object per frame (JSON Lines)')
    .option('--only <protos>', `print only frames carrying these (comma list: ${PROTOS.join(',')})`, protoList)
    .option('--issues', 'print only frames that have issues')
    .option('--roce-port <port>', 'also decode UDP port PORT as RoCEv2 (4791 always is); repeatable', collectPort, [] as number[])
    .addOption(new Option('--time <format>', 'timestamp format').choices(['abs', 'epoch', 'rel', 'none']).default('abs'))
    .option('--no-icrc', 'do not verify the RoCE ICRC')
    .option('-q, --quiet', 'no per-frame output, only the closing summary')
    .option('--no-color', 'never colour (colour is only used on a terminal and never with NO_COLOR)')
    .argument('[filter...]', 'capture filter (BPF) — for live capture, not yet available')
    .addHelpText('after', `
Examples:
  smcdump -r pcaps/a-first-contact.pcap              one line per frame
  smcdump -r pcaps/a-first-contact.pcap --only clc,llc
                                                     just the handshake and link control
  smcdump -r pcaps/d-bulk-2MiB.pcap -c 20 -V         field tree + hex dump of the first 20 frames
  smcdump -r trace.pcapng --json | jq .smc           machine-readable output
  smcdump -r trace.pcap --roce-port 4792 --issues    RoCE on an extra port, only frames with problems

Times are UTC. The closing summary goes to stderr. Exit status: 0 on success (even when frames
have issues), 1 on unreadable input or bad arguments.`);
  return p;
}

interface Opts {
  read?: string; interface?: string; count?: number; verbose?: boolean; tree?: boolean; json?: boolean;
  only?: SmcProto[]; issues?: boolean; rocePort: number[]; time: TimeFormat; icrc: boolean; quiet?: boolean; color: boolean;
}

export async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  program.exitOverride((e) => { throw new CliError(e.message.replace(/^error: /, ''), e.exitCode === 0 ? 0 : 2); });
  program.configureOutput({ writeErr: () => undefined });
  try {
    program.parse(argv);
  } catch (e) {
    if (e instanceof CliError && e.exitCode === 0) return; // --help, --version
    throw e;
  }
  const o = program.opts<Opts>();
  const filter = program.args;
  if (o.interface) throw new CliError('live capture (-i) is not available in this version; read a file with -r');
  if (!o.read) throw new CliError('no input: give a capture file with -r FILE (see --help)');
  if (filter.length > 0) throw new CliError(`filter expressions ("${filter.join(' ')}") are not supported with -r yet; use --only to select SMC protocols`);

  const reader = await openCapture(o.read);
  const decoder = new FrameDecoder({ rocePorts: o.rocePort, tree: o.tree === true, icrc: o.icrc });
  const chalk = makeChalk(o.color && !o.json);
  const out = new Out();
  let only = 0;
  for (const p of o.only ?? []) only |= PROTO_BIT[p];
  const counted: SmcProto[] = ['tcpopt', 'clc', 'llc', 'cdc', 'rdma'];
  const counts = new Array<number>(counted.length).fill(0);
  let frames = 0, printed = 0, issues = 0, errors = 0, t0: bigint | undefined;
  try {
    for (let f = reader.next(); f; f = reader.next()) {
      frames++;
      const d = decoder.decode(f);
      if (t0 === undefined) t0 = d.tsNs;
      const mask = frameProtoMask(d);
      if (mask !== 0) for (let i = 0; i < counted.length; i++) if (mask & PROTO_BIT[counted[i]!]) counts[i]!++;
      issues += d.issues.length;
      for (const i of d.issues) if (i.severity === 'error') errors++;
      if (!o.quiet) {
        const show = (only === 0 || (mask & only) !== 0) && (!o.issues || d.issues.length > 0);
        if (show) {
          printed++;
          if (o.json) out.line(renderJson(d));
          else {
            out.line(renderLine(d, { chalk, time: o.time, t0 }));
            if (o.tree) out.line(renderTree(d, chalk));
            else if (o.verbose) for (const i of d.issues) out.line(`        ${i.severity} ${i.code} @${i.offset}: ${i.message}`);
          }
        }
      }
      if (o.count !== undefined && frames >= o.count) break;
    }
  } finally {
    out.flush();
    reader.close();
  }
  for (const w of reader.warnings) process.stderr.write(`smcdump: warning: ${w}\n`);
  const smc = counted.map((k, i) => [k, counts[i]!] as const).filter(([, v]) => v > 0).map(([k, v]) => `${v} ${k}`).join(', ');
  process.stderr.write(`${frames} frames${printed !== frames && !o.quiet ? ` (${printed} shown)` : ''}; SMC: ${smc || 'none'}; ${issues} issues (${errors} errors)\n`);
}

/** Run as a command: one-line errors, exit status, never a stack trace. */
export function run(argv: string[]): void {
  main(argv).catch((e: unknown) => die('smcdump', e));
}
