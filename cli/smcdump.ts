// smcdump: tcpdump for SMC-R. Reads pcap/pcapng (-r) or captures live (-i), prints one line
// per frame that speaks SMC (CLC, LLC, CDC, RDMA WRITE, TCP option 254), a field tree with -V,
// or JSON lines; writes what it reads or captures to a pcapng/pcap file with -w.

import { Command, InvalidArgumentError, Option } from 'commander';
import { accessSync, constants as fsc, statSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { type as osType, release as osRelease } from 'node:os';
import { CaptureFormatError } from '../capture/reader.js';
import { expandCaptureArgs, MergedReader, tsDigits } from '../capture/merge.js';
import type { CaptureWriter, WriteTarget } from '../capture/writer.js';
import type { CapturedFrame } from '../capture/types.js';
import type { BpfMatcher, InterfaceInfo, LiveStats } from '../capture/live.js';
import { FrameDecoder, frameProtoMask, PROTO_BIT, type SmcProto } from '../dissectors/frame.js';
import { CachedLine, renderLine, writeLineRest, type LineOptions } from '../dissectors/render/line.js';
import { TimeColumn, TimeParts, timeModeForTCount, type TimeMode } from '../dissectors/render/time.js';
import { TcpRelative } from '../dissectors/render/tcpseq.js';
import type { Selection } from '../dissectors/render/select.js';
import type { Ladder } from '../dissectors/render/ladder.js';
import { Tracker } from '../dissectors/tracker/tracker.js';
import { HeaderPrediction } from '../dissectors/predict.js';
import type { FollowDir, FollowFormat } from './follow.js';
import { CliError, die, makeChalk, Out, writeAll } from './output.js';
import { jsonReplacer } from '../dissectors/wire/common.js';
import { Progress, wantProgress } from './progress.js';
import type { ReportRecorder } from './report.js';
import type { StateJoin, StateAnomaly } from './statejoin.js';
import type { EndpointState } from './stateread.js';
import type { FrameNote } from '../dissectors/tracker/model.js';
import type { ControlWatch } from '../endpoint/control.js';

/**
 * The modules only some modes use, loaded (dynamic import) before the first frame when the
 * options ask for them: a plain one-line replay pays for none of them at start-up (each ES
 * module costs its read, compile and link; the report, state and live-capture ones are most of
 * the ~110 a full load reads). Each field is set by `loadModules` when the option named next to
 * it is given, and read only under that option.
 */
const lazy: {
  writer?: typeof import('../capture/writer.js'); // -w
  live?: typeof import('../capture/live.js'); // -i, -D, --version, a filter
  linkhdr?: typeof import('../dissectors/render/linkhdr.js'); // -e, -x, -X, -A
  hexdump?: typeof import('../dissectors/render/hexdump.js'); // -x, -X, -A
  verbose?: typeof import('../dissectors/render/verbose.js'); // -V
  json?: typeof import('../dissectors/render/json.js'); // --json
  summary?: typeof import('../dissectors/render/summary.js'); // --summary
  select?: typeof import('../dissectors/render/select.js'); // --conn, --lg, --link
  ladder?: typeof import('../dissectors/render/ladder.js'); // --ladder, --ladder-svg
  follow?: typeof import('./follow.js'); // --follow
  report?: typeof import('./report.js'); // --report
  statejoin?: typeof import('./statejoin.js'); // --endpoint, --state
  stateread?: typeof import('./stateread.js'); // --endpoint, --state
  state?: typeof import('./state.js'); // --endpoint, --state
  control?: typeof import('../endpoint/control.js'); // --endpoint
  program?: typeof import('./lib/program.js'); // --version
} = {};

/** Load what the options need (see `lazy`); everything else stays unread. */
async function loadModules(o: Opts, filter: string): Promise<void> {
  const want = <K extends keyof typeof lazy>(k: K, when: unknown, load: () => Promise<NonNullable<(typeof lazy)[K]>>): Promise<void> | undefined =>
    when && !lazy[k] ? load().then((m) => { lazy[k] = m; }) : undefined;
  const state = o.endpoint !== undefined || o.state !== undefined;
  await Promise.all([
    want('writer', o.write !== undefined, () => import('../capture/writer.js')),
    want('live', o.interface !== undefined || o.listInterfaces || o.version || filter !== '', () => import('../capture/live.js')),
    want('linkhdr', o.e || o.x || o.X || o.A, () => import('../dissectors/render/linkhdr.js')),
    want('hexdump', o.x || o.X || o.A, () => import('../dissectors/render/hexdump.js')),
    want('verbose', o.tree, () => import('../dissectors/render/verbose.js')),
    want('json', o.json, () => import('../dissectors/render/json.js')),
    want('summary', o.summary, () => import('../dissectors/render/summary.js')),
    want('select', o.conn !== undefined || o.lg !== undefined || o.link !== undefined, () => import('../dissectors/render/select.js')),
    want('ladder', o.ladder || o.ladderSvg !== undefined, () => import('../dissectors/render/ladder.js')),
    want('follow', o.follow !== undefined, () => import('./follow.js')),
    want('report', o.report !== undefined, () => import('./report.js')),
    want('statejoin', state, () => import('./statejoin.js')),
    want('stateread', state, () => import('./stateread.js')),
    want('state', state, () => import('./state.js')),
    want('control', o.endpoint !== undefined, () => import('../endpoint/control.js')),
    want('program', o.version, () => import('./lib/program.js')),
  ]);
}

const PROTOS: SmcProto[] = ['tcpopt', 'clc', 'llc', 'cdc', 'rdma', 'roce'];

function intArg(name: string, min: number, max: number) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return n;
  };
}

function collectFile(v: string, prev: string[] | undefined): string[] { return [...(prev ?? []), v]; }

/** For options given several times with tcpdump's meaning of "more": -tt, -xx, -XX. */
function count(_v: string, prev: number): number { return prev + 1; }

function collectPort(v: string, prev: number[]): number[] { return [...prev, intArg('port', 1, 65535)(v)]; }

function protoList(v: string): SmcProto[] {
  const list = v.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
  for (const p of list) if (!PROTOS.includes(p as SmcProto)) throw new InvalidArgumentError(`unknown protocol "${p}" (choose from ${PROTOS.join(', ')})`);
  return list as SmcProto[];
}

export function buildProgram(): Command {
  const p = new Command('smcdump');
  p.description('Decode SMC-R traffic (TCP option 254, CLC, RoCE LLC/CDC/RDMA WRITE) from capture files or live interfaces, tcpdump-style.')
    .usage('(-r FILE [-r FILE...] | -i IFACE) [options] [filter...]')
    .option('-r, --read <file>', 'read frames from a pcap or pcapng file; several -r (or a quoted glob) are merged by timestamp, like mergecap', collectFile)
    .option('-i, --interface <iface>', 'capture live on IFACE (lo, eth0, any, an RDMA device where libpcap supports it)')
    .option('-D, --list-interfaces', 'list the interfaces smcdump can capture on, then exit')
    .option('-w, --write <file>', 'also write the frames (after the filter) to FILE; "-" = stdout (implies -q)')
    .addOption(new Option('-F, --format <format>', 'format of the -w file').choices(['pcapng', 'pcap']).default('pcapng'))
    .option('-c, --count <n>', 'stop after N frames', intArg('count', 1, Number.MAX_SAFE_INTEGER))
    .option('-s, --snaplen <bytes>', 'live capture: bytes kept per frame (0 = 262144, the default)', intArg('snaplen', 0, 262144))
    .option('-B, --buffer-size <KiB>', 'live capture: kernel ring size in KiB (default 32768)', intArg('buffer size', 64, 4 << 20))
    .option('-p, --no-promiscuous-mode', 'live capture: do not put the interface in promiscuous mode')
    .option('--immediate', 'live capture: deliver each frame at once (default: in blocks, up to ~100 ms late)')
    .option('-n', 'do not resolve addresses or ports (smcdump never does; accepted for tcpdump habits)')
    .option('-e', 'print the link-level header on each line (tcpdump -e)')
    .option('-t', 'time column as tcpdump: -t none, -tt seconds since the epoch, -ttt since the previous frame, -tttt date and time, -ttttt since the first frame', count, 0)
    .option('--utc', 'times of day in UTC (default: local time, TZ respected, like tcpdump)')
    .addOption(new Option('--time-stamp-precision <p>', 'fraction digits: micro (6) or nano (9); default: nano where the capture file has nanoseconds, else micro').choices(['micro', 'nano']))
    .option('--nano', 'same as --time-stamp-precision=nano')
    .option('-x', 'print each frame in hex without its link-level header (-xx: with it)', count, 0)
    .option('-X', 'print each frame in hex and ASCII without its link-level header (-XX: with it)', count, 0)
    .option('-A', 'print each frame in ASCII without its link-level header (-AA: with it)', count, 0)
    .option('-S, --absolute-tcp-sequence-numbers', 'print absolute TCP sequence numbers (default: relative to the first, as tcpdump)')
    .option('-#, --number', 'number the frames (the default: --summary, --follow and --ladder refer to frame numbers)')
    .option('--no-number', 'no frame-number column (lines then start like tcpdump\'s)')
    .option('-l', 'line-buffered output: each line is written at once (for | grep, | tee)')
    .option('-v, --verbose', 'print each issue under its frame')
    .option('-V, --tree', 'print the full field tree with byte offsets and a hex dump')
    .option('--json', 'one JSON object per frame (JSON Lines); with -D a JSON array of interfaces')
    .option('--only <protos>', `print only frames carrying these (comma list: ${PROTOS.join(',')})`, protoList)
    .option('--issues', 'print only frames that have issues')
    .option('--roce-port <port>', 'also decode UDP port PORT as RoCEv2 (4791 always is); repeatable', collectPort, [] as number[])
    .addOption(new Option('--time <format>', 'time column: abs (time of day, the default), epoch (as -tt), rel (seconds since the first frame), none (as -t)').choices(['abs', 'epoch', 'rel', 'none']).default('abs'))
    .option('--no-icrc', 'do not verify the RoCE ICRC')
    .option('-q, --quiet', 'no per-frame output, only the closing summary')
    .option('--progress', 'always show the -r progress bar on stderr')
    .option('--no-progress', 'never show it (default: shown for long -r replays when stdout is not a terminal)')
    .option('--no-color', 'never colour (colour is only used on a terminal and never with NO_COLOR)')
    .option('--summary', 'instead of frames: link groups, links and connections as rebuilt from the wire (like smcss/smcr), handshake timelines, fallbacks explained, anomalies')
    .option('--follow <conn>', 'instead of frames: the application byte stream of SMC-R connection CONN (number from --summary, or ip:port-ip:port)')
    .addOption(new Option('--follow-format <fmt>', 'stream output for --follow').choices(['text', 'hex', 'raw']).default('text'))
    .addOption(new Option('--follow-dir <dir>', 'which direction --follow prints').choices(['both', 'c2s', 's2c']).default('both'))
    .option('--ladder', 'instead of frames: a ladder diagram of the flows between the hosts (TCP/CLC single, RoCE double arrows)')
    .option('--ladder-svg <file>', 'also write the ladder diagram as SVG to FILE (checked before anything is read)')
    .option('--wide', '--summary: every column at full width and every row, whatever the terminal width')
    .option('--conn <conn>', 'only SMC connection CONN (number from --summary, or ip:port-ip:port) in every view: its TCP frames, CLC, CDC and RDMA WRITEs on any link, the ladder, the summary')
    .option('--lg <n>', 'only link group N (LG1 or 1) in every view')
    .option('--link <name>', 'only link NAME (e.g. LG1/L2) in every view')
    .option('--report <file.html>', 'also write a self-contained HTML report to FILE at the end: diagnosis, tables, zoomable ladder, cursor and link graphs')
    .option('--no-track', 'no correlation (no [link conn] tags or anomalies): plain per-frame decoding, faster')
    .option('--endpoint <sock>', "an smcscope endpoint's control socket: alone (with --summary) its state like smcss; with -r/-i frames get the endpoint's names and every disagreement between wire and endpoint state is flagged")
    .option('--state <file>', 'a saved endpoint state (--state-json, or {"cmd":"state"} on the control socket): like --endpoint, offline')
    .argument('[filter...]', 'capture filter in pcap-filter (BPF) syntax, for -i and -r, e.g. "udp port 4791 or tcp"')
    .addHelpText('after', `
Examples:
  smcdump -r pcaps/a-first-contact.pcap              one line per frame
  smcdump -r pcaps/a-first-contact.pcap -e -tttt -X -c 5
                                                     tcpdump's link header, date, hex/ASCII dump
  smcdump -r 'caps/*.pcapng' --summary               several files merged by timestamp
  smcdump -r pcaps/a-first-contact.pcap --only clc,llc
                                                     just the handshake and link control
  smcdump -r pcaps/d-bulk-2MiB.pcap -c 20 -V         field tree + hex dump of the first 20 frames
  smcdump -r trace.pcapng --json | jq .smc           machine-readable output
  smcdump -r trace.pcap --roce-port 4792 --issues    RoCE on an extra port, only frames with problems
  smcdump -r trace.pcap -w clc.pcapng tcp            copy the TCP frames (CLC) to a new file
  smcdump -r pcaps/b-second-contact.pcap --summary   link groups, links, connections, timelines
  smcdump -r pcaps/d-bulk-2MiB.pcap --follow 1 --follow-dir c2s --follow-format raw > data.bin
                                                     the 2 MiB the client sent over RDMA
  smcdump -r pcaps/a-first-contact.pcap --ladder     the flow, drawn like RFC 7609's figures
  smcdump -D                                         interfaces to capture on
  smcdump --endpoint /run/smcscope/4242.sock --summary
                                                     a running endpoint's link groups, links, connections
  smcdump -r cap.pcapng --state state.json           frames in the endpoint's names, state disagreements
  smcdump -i eth0 udp port 4791 or tcp               live: Soft-RoCE (rxe) and CLC on eth0
  smcdump -i lo -w smc.pcapng -q                     record to pcapng (Wireshark opens it), Ctrl-C ends

Times are local time (TZ) unless --utc, with nanoseconds when the file has them. The closing
summary goes to stderr; a live capture ends with Ctrl-C (or -c) and reports frames captured,
received by the filter and dropped by the kernel; Ctrl-C during -r stops reading and prints
what was read (and the --summary/--follow/--ladder report so far). Live capture needs
CAP_NET_RAW (root).

Exit status: 0 on success, even when frames have issues and after Ctrl-C; 1 unreadable,
corrupt or truncated input (the frames before the damage are printed first), a bad filter,
capture errors, missing privileges, nothing to --follow, unwritable output; 2 bad arguments
(unknown or conflicting options, bad values, no input). Full manual: docs/smcdump.md.`);
  // not commander's .version(): the libpcap version needs the addon, loaded only when asked
  p.option('--version', 'print the versions of smcdump and libpcap, then exit');
  return p;
}

interface Opts {
  read?: string[]; interface?: string; listInterfaces?: boolean; write?: string; format: 'pcapng' | 'pcap'; version?: boolean;
  // tcpdump's output flags: -e, -t count, --utc, precision, -x/-X/-A counts, -S, -#, -l
  e?: boolean; t: number; utc?: boolean; timeStampPrecision?: 'micro' | 'nano'; nano?: boolean;
  x: number; X: number; A: number; absoluteTcpSequenceNumbers?: boolean; number?: boolean; l?: boolean;
  count?: number; snaplen?: number; bufferSize?: number; promiscuousMode: boolean; immediate?: boolean;
  verbose?: boolean; tree?: boolean; json?: boolean; only?: SmcProto[]; issues?: boolean; rocePort: number[];
  time: 'abs' | 'epoch' | 'rel' | 'none'; icrc: boolean; quiet?: boolean; progress?: boolean; color: boolean;
  summary?: boolean; wide?: boolean; conn?: string; lg?: string; link?: string; follow?: string; followFormat: FollowFormat; followDir: FollowDir; ladder?: boolean; ladderSvg?: string; track: boolean;
  /** --report FILE.html */
  report?: string;
  endpoint?: string; state?: string;
}

const COUNTED: SmcProto[] = ['tcpopt', 'clc', 'llc', 'cdc', 'rdma'];
/** PROTO_BIT of each COUNTED protocol (no keyed lookup by name per frame). */
const COUNTED_BITS: readonly number[] = COUNTED.map((p) => PROTO_BIT[p]);
const COUNTED_RDMA = COUNTED.indexOf('rdma');

/** Decode, count, print and (with -w) write each frame: the same path for files and live capture. */
class Dump {
  frames = 0;
  printed = 0;
  issues = 0;
  errors = 0;
  private readonly time: TimeColumn;
  /** The same column written as bytes from the frame's (seconds, ns) numbers, for the modes
   *  that need no other frame (undefined: every frame goes through `time`). */
  private readonly parts: TimeParts | undefined;
  /** Relative TCP sequence numbers (tcpdump's default), off with -S. */
  private readonly seq: TcpRelative | undefined;
  private readonly counts = new Array<number>(COUNTED.length).fill(0);
  private readonly decoder: FrameDecoder;
  private readonly only: number;
  private readonly chalk;
  readonly out = new Out();
  /** Correlation across frames (off with --no-track); report modes print from it at the end. */
  readonly tracker: Tracker | undefined;
  /** --conn / --lg / --link: only these frames, rows and ladder arrows. */
  private readonly select: Selection | undefined;
  readonly ladder: Ladder | undefined;
  /** --report: the time series the HTML report draws. */
  readonly recorder: ReportRecorder | undefined;
  /** --endpoint / --state with a capture: the endpoint's names on frames, disagreements at the end. */
  private joined: StateJoin | undefined;
  get join(): StateJoin | undefined { return this.joined; }
  set join(j: StateJoin | undefined) { this.joined = j; }
  /** Called after each frame (live: refresh the endpoint state when it named something unknown). */
  afterFrame: (() => void) | undefined;
  /** The disagreements found by finish(). */
  disagreements: StateAnomaly[] = [];
  /** --summary / --follow / --ladder print a report at the end instead of frames. */
  private readonly report: boolean;
  /** `-w FILE -q` (no report asked): record like `tcpdump -w`, without decoding — the fast path
   *  that keeps a live capture drop-free at high rates. */
  private readonly recordOnly: boolean;
  /** renderLine's options, refilled per frame. */
  private readonly lineOpts: LineOptions;
  /** The common RoCE lines from cached bytes (no colour, no -e: the line is then plain text). */
  private readonly cached: CachedLine | undefined;
  /** Header prediction: WRITE MIDDLE/LAST and ACK frames of known flows go to the tracker as
   *  numbers, undecoded, where nothing shows a frame (-q, --summary). */
  readonly predict: HeaderPrediction | undefined;

  constructor(private readonly o: Opts, private readonly writer: CaptureWriter | undefined, liveFilter = false) {
    // compact: only what the summary, the diagnosis and one-line notes read; --follow, the
    // HTML report, the ladder and the endpoint state comparison get the whole model.
    const compact = o.follow === undefined && !o.report && !o.ladder && !o.ladderSvg && o.endpoint === undefined && o.state === undefined;
    // where nothing keeps a decoded frame past the next one (one-line, -q, --summary: the
    // compact tracker reads it and the line is written at once), the decoder refills one
    // record per layer instead of making new ones (-V and --json keep their own)
    const reuse = compact && o.tree !== true && o.json !== true;
    // an SMC item's summary text is read only by -V, --json, the ladder and the report (the
    // one-line renderer writes it from the item's value; the tracker never reads it)
    const report = o.summary === true || o.follow !== undefined || o.ladder === true;
    const summaries = o.tree === true || o.json === true || o.ladder === true || o.ladderSvg !== undefined || o.report !== undefined;
    this.decoder = new FrameDecoder({ rocePorts: o.rocePort, tree: o.tree === true, icrc: o.icrc, reuse, summaries });
    this.chalk = makeChalk(o.color && !o.json);
    const legacy: Record<Opts['time'], TimeMode> = { abs: 'hms', epoch: 'epoch', rel: 'rel', none: 'none' };
    const mode = o.t > 0 ? timeModeForTCount(o.t) : legacy[o.time];
    this.time = new TimeColumn(mode, o.utc === true);
    const parts = new TimeParts(mode, o.utc === true);
    this.parts = parts.supported ? parts : undefined;
    this.seq = o.absoluteTcpSequenceNumbers ? undefined : new TcpRelative();
    this.lineOpts = { chalk: this.chalk, time: '', link: undefined, seq: undefined, number: o.number !== false };
    this.cached = this.chalk.level === 0 && !o.e && process.env.SMCSCOPE_LINE_CACHE !== '0' ? new CachedLine() : undefined;
    this.report = report;
    this.recordOnly = o.write !== undefined && o.quiet === true && !this.report && !o.ladderSvg && !o.report;
    // reuseNote: one note object refilled per frame; only where nothing keeps a note past its
    // frame (the follow/report/ladder/state consumers are outside compact mode)
    if ((o.track || this.report || o.report) && !this.recordOnly) this.tracker = new Tracker({ ...(o.follow !== undefined ? lazy.follow!.parseFollow(o.follow) : {}), filtered: liveFilter, compact, reuseNote: compact });
    if (o.ladder || o.ladderSvg) this.ladder = new lazy.ladder!.Ladder();
    this.select = lazy.select?.parseSelection(o);
    if (this.select && !this.tracker) throw new CliError('--conn, --lg and --link need correlation: drop --no-track');
    // the comparison with an endpoint's state reads the tracker's model (-w -q records only: nothing to compare)
    if ((o.state !== undefined || o.endpoint !== undefined) && !this.tracker && !this.recordOnly) {
      throw new CliError('--state and --endpoint with a capture compare the correlation with the endpoint: drop --no-track');
    }
    if (o.report && this.tracker) this.recorder = new lazy.report!.ReportRecorder(this.tracker);
    // a frame is seen only by the compact tracker and the counts: -q or a report of the tracker
    // (--summary; --follow and the ladder are not compact) and nothing else per frame
    const unseen = (o.quiet || this.report) && compact && o.tree !== true;
    if (this.tracker && unseen && process.env.SMCSCOPE_PREDICT !== '0') this.predict = new HeaderPrediction(o.icrc !== false);
    let only = 0;
    for (const p of o.only ?? []) only |= PROTO_BIT[p];
    this.only = only;
  }

  /** Track every frame read; count, print and write only the ones the filter selected.
   *  `digits`: fraction digits of the frame's timestamp (6 or 9). */
  handle(f: CapturedFrame, selected = true, digits: 6 | 9 = 6): void {
    if (!selected) {
      // A read filter narrows what is shown, not what correlation sees (-r only: a live
      // filter runs in the kernel and the tracker is told that frames may be hidden).
      if (this.tracker || this.join) {
        const d = this.decoder.decode(f);
        const n = this.tracker?.feed(d);
        this.join?.feed(d, n);
      }
      return;
    }
    this.writer?.write(f);
    this.frames++;
    if (this.recordOnly) return;
    const p = this.predict;
    if (p !== undefined && p.take(f, this.decoder, this.tracker!)) {
      // a predicted frame is a WRITE MIDDLE/LAST or an ACK without issues: RoCE, and RDMA when a WRITE
      if (p.wrote) this.counts[COUNTED_RDMA]!++;
      return;
    }
    const d = this.decoder.decode(f);
    p?.learn(f, d);
    const mask = frameProtoMask(d);
    if (mask !== 0) for (let i = 0; i < COUNTED_BITS.length; i++) if (mask & COUNTED_BITS[i]!) this.counts[i]!++;
    this.issues += d.issues.length;
    for (const i of d.issues) if (i.severity === 'error') this.errors++;
    let note = this.tracker?.feed(d);
    const inSelection = !this.select || lazy.select!.frameSelected(this.tracker!, this.select, note);
    if (note && inSelection) this.ladder?.add(d, note);
    if (note) this.recorder?.add(d, note);
    const ep = this.join?.feed(d, note);
    this.afterFrame?.();
    if (ep) {
      // the endpoint's own names: [LG2/L1 LG2/5 out] (JSON keeps the tracker's and adds them)
      const base: FrameNote = note ?? { anomalies: [] };
      note = this.o.json ? { ...base, endpoint: ep } as FrameNote
        : { ...base, link: `${ep.link}${ep.conn !== undefined ? ' ' + ep.conn : ''} ${ep.dir}`, conn: undefined, dir: undefined };
    }
    const o = this.o;
    if (o.quiet || this.report) return;
    // as tcpdump: relative numbers and -ttt deltas run over every frame that passed the
    // capture filter, whether or not --only/--issues then show it
    const seq = d.tcp && this.seq ? this.seq.bases(d) : undefined;
    // the number and time columns go straight into the output buffer when the reader gave
    // the time as two numbers (pcap): no BigInt arithmetic and no strings for them
    const sec = this.parts !== undefined && f.tsSec !== undefined ? f.tsSec : -1;
    const time = sec >= 0 ? '' : this.time.format(d.tsNs, digits);
    if (!inSelection) return;
    if ((this.only !== 0 && (mask & this.only) === 0) || (o.issues && d.issues.length === 0 && (note === undefined || note.anomalies.length === 0))) return;
    this.printed++;
    if (o.json) { this.out.line(lazy.json!.renderJson(d, note)); return; }
    const link = o.e || o.x || o.X || o.A ? lazy.linkhdr!.linkHeader(f.data, f.linktype, f.origlen) : undefined;
    // one options object for every line (no per-frame object spreads on the hot path)
    const lo = this.lineOpts;
    lo.time = time;
    lo.link = o.e ? link!.text : undefined;
    lo.seq = seq;
    if (sec >= 0) {
      this.out.lineStart();
      if (lo.number) { this.out.int(d.n, 6); this.out.byte(32); }
      this.parts!.writeParts(this.out, sec, f.tsSubNs ?? 0, digits);
      if (this.cached === undefined || !this.cached.write(this.out, d, note, seq)) writeLineRest(this.out, d, lo, note);
      this.out.byte(10);
    } else this.out.line(renderLine(d, lo, note));
    if (link && (o.x || o.X || o.A)) {
      // tcpdump: -X wins over -x, -x over -A; doubled, the link-level header is included
      const level = o.X || o.x || o.A;
      const bytes = level > 1 ? f.data : f.data.subarray(link.length);
      const hx = lazy.hexdump!;
      if (bytes.length > 0) this.out.line(o.X ? hx.tcpdumpHex(bytes, true) : o.x ? hx.tcpdumpHex(bytes, false) : hx.tcpdumpAscii(bytes));
    }
    if (o.tree) this.out.line(lazy.verbose!.renderTree(d, this.chalk));
    else if (o.verbose) for (const i of d.issues) this.out.line(`        ${i.severity} ${i.code} @${i.offset}: ${i.message}`);
    if (o.l) this.out.flush();
  }

  /** End of input: the report of --summary / --follow / --ladder, and the SVG. Returns a line for stderr. */
  finish(): string | undefined {
    const t = this.tracker;
    const o = this.o;
    if (this.join) {
      this.disagreements = this.join.compare();
      if (t) for (const a of this.disagreements) t.addAnomaly(a);
    }
    const stateReport = (): void => {
      if (!this.join) return;
      if (o.summary && o.json) return; // in the summary object
      if (o.json) this.out.line(JSON.stringify({ stateDisagreements: lazy.state!.disagreementsJson(this.disagreements) }));
      else if (o.summary || this.report) this.out.line('\n' + lazy.state!.renderDisagreements(this.disagreements, this.join.current, this.chalk));
    };
    if (!t) {
      stateReport();
      return this.join && !o.json ? lazy.state!.renderDisagreements(this.disagreements, this.join.current, makeChalk(false)) : undefined;
    }
    t.finish();
    let line: string | undefined;
    if (o.follow !== undefined) {
      line = lazy.follow!.renderFollow(t, o.json ? 'json' : o.followFormat, o.followDir, this.chalk, (b: string | Uint8Array) => {
        if (typeof b === 'string') this.out.line(b.endsWith('\n') ? b.slice(0, -1) : b);
        else { this.out.flush(); writeAll(1, b); }
      });
    }
    if (o.summary) {
      if (o.json) {
        const extra = this.join ? { endpointState: this.join.current, stateDisagreements: lazy.state!.disagreementsJson(this.disagreements) } : {};
        // one JSON document written in pieces of about 1 MiB (a 100 000-connection summary
        // is hundreds of MB of text: never one string)
        let parts: string[] = [], size = 0;
        const spill = (last: boolean): void => {
          this.out.flush();
          try { writeAll(1, Buffer.from(parts.join('') + (last ? '\n' : ''))); } catch (e) { if ((e as NodeJS.ErrnoException).code === 'EPIPE') process.exit(0); throw e; }
          parts = []; size = 0;
        };
        lazy.summary!.writeSummaryJson(t, this.select, extra, jsonReplacer, (s: string) => { parts.push(s); size += s.length; if (size >= 1 << 20) spill(false); });
        spill(true);
      } else {
        // A terminal gets tables that fit its width and the top rows; a pipe gets every row,
        // fitted to $COLUMNS or 80 columns; --wide gets everything.
        const tty = process.stdout.isTTY === true;
        const width = o.wide ? Infinity : tty ? process.stdout.columns || 80 : Number(process.env.COLUMNS) || 80;
        lazy.summary!.writeSummary(t, this.chalk, { width, maxRows: tty && !o.wide ? 40 : Infinity, ...(this.select ? { select: this.select } : {}) }, (l: string) => { this.out.line(l); });
        if (this.join) this.out.line('\n' + lazy.state!.renderState(this.join.current, this.chalk));
      }
    }
    stateReport();
    if (o.ladder && this.ladder) this.out.line(this.ladder.renderText(this.chalk));
    if (o.ladderSvg && this.ladder) {
      try { writeFileSync(o.ladderSvg, this.ladder.renderSvg(t.groups)); } catch (e) { throw new CliError(`cannot write ${o.ladderSvg}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`); }
    }
    if (o.report && this.recorder) lazy.report!.writeReport(o.report, t, this.recorder, o.read ?? o.interface ?? 'capture');
    if (!o.summary && t.anomalyCount > 0) {
      const bySev = { error: 0, warn: 0, note: 0 };
      for (const a of t.anomalyTotals.values()) bySev[a.severity] += a.count;
      line = (line ? line + '\n' : '') + `${t.anomalyCount} anomal${t.anomalyCount === 1 ? 'y' : 'ies'} (${bySev.error} errors, ${bySev.warn} warnings, ${bySev.note} notes): --summary lists them`;
    }
    // frames on stdout, the state comparison with the closing summary on stderr
    if (this.join && !o.summary && !o.json && !this.report) line = (line ? line + '\n' : '') + lazy.state!.renderDisagreements(this.disagreements, this.join.current, makeChalk(false));
    return line;
  }

  /** "45 frames; SMC: 2 tcpopt, 3 clc; 1 issues (0 errors)" (`lead` replaces "45 frames"). */
  summary(lead = `${this.frames} frames`): string {
    if (this.recordOnly) return `${lead} written to ${this.o.write === '-' ? 'stdout' : this.o.write} (recorded without decoding: -w with -q)`;
    const smc = COUNTED.map((k, i) => [k, this.counts[i]!] as const).filter(([, v]) => v > 0).map(([k, v]) => `${v} ${k}`).join(', ');
    const shown = this.printed !== this.frames && !this.o.quiet && !this.report ? ` (${this.printed} shown)` : '';
    return `${lead}${shown}; SMC: ${smc || 'none'}; ${this.issues} issues (${this.errors} errors)`;
  }
}

function openWriter(o: Opts, extra: { linktype?: number; snaplen?: number }): CaptureWriter | undefined {
  if (!o.write) return undefined;
  if (o.read !== undefined && o.write !== '-' && o.read.some((r) => resolve(r) === resolve(o.write!))) throw new CliError(`-w ${o.write} would overwrite a file being read`);
  // stdout: through a sink that waits out EAGAIN on a non-blocking pipe and ends quietly on EPIPE.
  const target: WriteTarget = o.write !== '-' ? o.write : {
    write: (chunk: Uint8Array) => {
      try { writeAll(1, chunk); } catch (e) { if ((e as NodeJS.ErrnoException).code === 'EPIPE') process.exit(0); throw e; }
    },
  };
  let w: CaptureWriter;
  try {
    w = lazy.writer!.createCaptureWriter(target, {
      format: o.format, nanosecond: true, userAppl: 'smcdump (smcscope)', os: `${osType()} ${osRelease()}`,
      ...(extra.linktype !== undefined ? { linktype: extra.linktype } : {}),
      ...(extra.snaplen !== undefined && extra.snaplen > 0 ? { snaplen: extra.snaplen } : {}),
    });
  } catch (e) {
    throw new CliError((e as Error).message);
  }
  // Whatever ends the process (EPIPE on stdout, an error), buffered frames reach the file.
  process.once('exit', () => { try { w.close(); } catch { /* already reported */ } });
  return w;
}

async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  program.exitOverride((e) => { throw new CliError(e.message.replace(/^error: /, ''), e.exitCode === 0 ? 0 : 2); });
  // --help goes to stdout with a synchronous write: `smcdump --help | head` must not end in an
  // EPIPE stack trace.
  program.configureOutput({ writeErr: () => undefined, writeOut: (str) => { try { writeSync(1, str); } catch { /* reader gone */ } } });
  try {
    program.parse(argv);
  } catch (e) {
    if (e instanceof CliError && e.exitCode === 0) return; // --help, --version
    throw e;
  }
  const o = program.opts<Opts>();
  const filter = program.args.join(' ').trim();
  if (o.write === '-') o.quiet = true;
  // before anything reads `lazy` (--version included)
  await loadModules(o, filter);
  if (o.version) return printVersion();
  if (o.listInterfaces) return listIfaces(o);
  // usage errors exit 2, like commander's own
  if (o.interface !== undefined && o.read !== undefined) throw new CliError('-r and -i exclude each other: read a file or capture live', 2);
  if (o.endpoint !== undefined && o.state !== undefined) throw new CliError('--endpoint and --state exclude each other: a live endpoint or a saved state', 2);
  // before any work: an hour of reading must not end in "cannot write"
  if (o.ladderSvg !== undefined) checkWritable(o.ladderSvg, '--ladder-svg');
  if (o.report !== undefined) checkWritable(o.report, '--report');
  if ((o.endpoint !== undefined || o.state !== undefined) && o.interface === undefined && o.read === undefined) return stateView(o);
  if (o.interface !== undefined) return live(o, filter);
  if (!o.read) throw new CliError('no input: give a capture file with -r FILE or an interface with -i IFACE (see --help)', 2);
  return replay(o, filter);
}

/** FILE can be created or overwritten: its directory exists and is writable, it is no directory. */
function checkWritable(file: string, flag: string): void {
  const fail = (why: string): never => { throw new CliError(`${flag} ${file}: ${why}`); };
  let st;
  try { st = statSync(file); } catch { st = undefined; }
  if (st?.isDirectory()) fail('is a directory (give a file name)');
  if (st) {
    try { accessSync(file, fsc.W_OK); } catch { fail('not writable'); }
    return;
  }
  const dir = dirname(resolve(file));
  let ds;
  try { ds = statSync(dir); } catch { fail(`no such directory ${dir}`); }
  if (!ds!.isDirectory()) fail(`${dir} is not a directory`);
  try { accessSync(dir, fsc.W_OK | fsc.X_OK); } catch { fail(`directory ${dir} is not writable`); }
}

/** Like tcpdump --version: this program's version, then the libpcap it runs on. */
function printVersion(): void {
  let pcap: string;
  try { pcap = lazy.live!.pcapVersion(); } catch (e) { pcap = `libpcap: ${(e as Error).message}`; }
  writeAll(1, Buffer.from(`smcdump ${lazy.program!.packageVersion()} (smcscope)\n${pcap}\n`));
}

/** `smcdump --endpoint SOCK` / `--state FILE` without a capture: the endpoint's state, smcss-like. */
async function stateView(o: Opts): Promise<void> {
  const { state, raw } = o.endpoint !== undefined ? await lazy.state!.fetchState(o.endpoint) : lazy.state!.loadStateFile(o.state!);
  const out = new Out();
  out.line(o.json ? JSON.stringify(raw, jsonReplacer) : lazy.state!.renderState(state, makeChalk(o.color)));
  out.flush();
}

/** The state to join a capture with (--endpoint: asked now; --state: the file). */
async function initialState(o: Opts): Promise<EndpointState | undefined> {
  if (o.endpoint !== undefined) return (await lazy.state!.fetchState(o.endpoint)).state;
  if (o.state !== undefined) return lazy.state!.loadStateFile(o.state).state;
  return undefined;
}

/** Fraction digits forced by --time-stamp-precision / --nano (undefined: as the capture has them). */
function forcedDigits(o: Opts): 6 | 9 | undefined {
  if (o.nano || o.timeStampPrecision === 'nano') return 9;
  return o.timeStampPrecision === 'micro' ? 6 : undefined;
}

/** SIGINT/SIGTERM/SIGHUP while reading files: stop reading, then report what was read. A second
 *  signal ends the process at once (the handlers are gone by then). */
class StopOnSignal {
  stopped = false;
  private readonly signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  private readonly handler = (): void => { this.stopped = true; this.close(); };
  constructor() { for (const s of this.signals) process.on(s, this.handler); }
  close(): void { for (const s of this.signals) process.removeListener(s, this.handler); }
}

/**
 * The replay's frames between two looks at the event loop: read and handled until the end, a
 * damaged block or the -c count, or until the 1024th frame since the last look, which run()
 * returns unhandled (the caller reports progress and may yield first, then hands it to
 * handle()). A small function of its own: V8 compiles this loop once, where the loop inside the
 * async replay() had the whole of replay() compiled for it, more than once (on-stack replacement).
 */
class FrameLoop {
  /** Frames read so far. */
  read = 0;
  /** A corrupt block in the middle ended the loop (the frames before it were handled). */
  damage: string | undefined = undefined;

  constructor(private readonly reader: MergedReader, private readonly dump: Dump, private readonly bpf: BpfMatcher | undefined,
    private readonly digits: 6 | 9 | undefined, private readonly count: number | undefined) {}

  /** Handles frames until the end (null) or a frame whose count is a multiple of 1024 (returned unhandled). */
  run(): CapturedFrame | null {
    const reader = this.reader;
    for (;;) {
      let f: CapturedFrame | null;
      try {
        f = reader.next();
      } catch (e) {
        // a corrupt block in the middle: what came before it is reported, then the damage
        if (!(e instanceof CaptureFormatError)) throw e;
        this.damage = reader.readers.length > 1 ? `${reader.paths[reader.readers.indexOf(reader.current)]}: ${e.message}` : e.message;
        return null;
      }
      if (!f) return null;
      if ((++this.read & 1023) === 0) return f;
      if (this.handle(f)) return null;
    }
  }

  /** One frame through the filter and the dump; true when the -c count is reached. */
  handle(f: CapturedFrame): boolean {
    const bpf = this.bpf, dump = this.dump;
    const selected = !bpf || bpf.matches(f);
    if (!selected && !dump.tracker) return false;
    dump.handle(f, selected, this.digits ?? tsDigits(this.reader.current, f));
    return this.count !== undefined && dump.frames >= this.count;
  }
}

async function replay(o: Opts, filter: string): Promise<void> {
  const bpf = filter !== '' ? new lazy.live!.BpfMatcher(filter) : undefined;
  const st = await initialState(o);
  const reader = MergedReader.open(expandCaptureArgs(o.read!));
  const digits = forcedDigits(o);
  let writer: CaptureWriter | undefined;
  let read = 0;
  let dump: Dump | undefined;
  let progress: Progress | undefined;
  let damage: string | undefined;
  const after: string[] = [];
  const stop = new StopOnSignal();
  try {
    // A bad filter is reported before anything is read (pcapng: for the first interface).
    if (bpf && reader.linktype >= 0) bpf.compile(reader.linktype);
    writer = openWriter(o, { linktype: reader.format === 'pcap' ? reader.linktype : undefined });
    dump = new Dump(o, writer);
    if (st && dump.tracker) dump.join = new lazy.statejoin!.StateJoin(st, dump.tracker);
    if (wantProgress(o.progress)) progress = new Progress({ total: reader.fileSize, delayMs: o.progress ? 0 : 1000 });
    let lastYield = Date.now();
    const loop = new FrameLoop(reader, dump, bpf, digits, o.count);
    for (;;) {
      // every 1024th frame comes back unhandled: progress and a look at the event loop first
      const f = loop.run();
      if (!f) break;
      if (progress) progress.update(reader.bytesRead, loop.read);
      // Let a Ctrl-C through now and then: the loop is synchronous otherwise.
      if (Date.now() - lastYield > 50) {
        await new Promise<void>((r) => setImmediate(r));
        lastYield = Date.now();
      }
      if (stop.stopped) break;
      if (loop.handle(f)) break;
    }
    read = loop.read;
    damage = loop.damage;
    if (progress) { progress.update(reader.bytesRead, read); progress.end(); }
    // a live endpoint: compare with its state as it is now, after the whole file
    if (o.endpoint !== undefined && dump.join) dump.join.update((await lazy.state!.fetchState(o.endpoint)).state);
    const closing = dump.finish();
    if (closing) after.push(closing);
  } finally {
    stop.close();
    progress?.end();
    dump?.out.flush();
    reader.close();
    bpf?.close();
    writer?.close();
  }
  // A file that ends inside a record is damaged, not finished: its frames were printed above,
  // the summary says how many, and the exit status says it was not all there.
  const truncation = reader.warnings.filter((w) => /truncated/.test(w));
  for (const w of reader.warnings) if (!truncation.includes(w)) process.stderr.write(`smcdump: warning: ${w}\n`);
  const lead = bpf ? `${dump.frames} frames matched the filter (${read} read)` : undefined;
  process.stderr.write(`${dump.summary(lead)}${stop.stopped ? ' (interrupted)' : ''}\n`);
  for (const l of after) process.stderr.write(`${l}\n`);
  if (damage !== undefined) throw new CliError(`${damage}; the ${read} frames before it were read`);
  if (truncation.length > 0) throw new CliError(`${truncation[0]!} (the file is cut short); the ${read} frames before it were read`);
}

async function live(o: Opts, filter: string): Promise<void> {
  const st = await initialState(o);
  const cap = lazy.live!.LiveCapture.open({
    device: o.interface!, filter: filter || undefined, snaplen: o.snaplen || 262144, promisc: o.promiscuousMode,
    bufferSize: o.bufferSize !== undefined ? o.bufferSize * 1024 : undefined, immediate: o.immediate === true,
  });
  let writer: CaptureWriter | undefined;
  try {
    writer = openWriter(o, { linktype: cap.linktype, snaplen: cap.snaplen });
  } catch (e) {
    cap.close();
    throw e;
  }
  // The interface block goes out now, so even a capture that ends empty opens in Wireshark.
  if (writer !== undefined && writer instanceof lazy.writer!.PcapngWriter) writer.addInterface(cap.linktype, cap.name);
  const dump = new Dump(o, writer, filter !== '');
  // live: microseconds unless asked, as tcpdump (the -w file keeps the kernel's nanoseconds)
  const digits = forcedDigits(o) ?? 6;
  let watch: ControlWatch | undefined;
  if (st && dump.tracker) {
    const join = new lazy.statejoin!.StateJoin(st, dump.tracker, { live: o.endpoint !== undefined });
    dump.join = join;
    // newer snapshots name the link groups and connections that come up during the capture
    if (o.endpoint !== undefined) {
      const sock = o.endpoint;
      const apply = (v: unknown): void => { const p = lazy.stateread!.parseEndpointState(v); if (p.state) join.update(p.state); };
      watch = lazy.control!.watchControl(sock, 1000, apply, (e: Error) => process.stderr.write(`smcdump: warning: ${e.message}\n`));
      // a link or connection newer than the last snapshot: ask at once (at most every 100 ms)
      let asking = false, lastAsk = 0;
      dump.afterFrame = () => {
        if (!join.stale || asking || Date.now() - lastAsk < 100) return;
        asking = true;
        lastAsk = Date.now();
        lazy.control!.queryControl(sock).then(apply, () => undefined).finally(() => { asking = false; });
      };
    }
  }
  if (cap.warning) process.stderr.write(`smcdump: warning: ${cap.warning}\n`);
  process.stderr.write(`smcdump: listening on ${cap.name}, link-type ${cap.dltName} (${cap.dltDescription}), snapshot length ${cap.snaplen} bytes\n`);

  let stats: LiveStats;
  let failure: Error | undefined;
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  const handlers: Array<[NodeJS.Signals, () => void]> = [];
  try {
    stats = await new Promise<LiveStats>((resolve) => {
      let ending = false;
      const end = (drain: boolean): void => {
        if (ending) return;
        ending = true;
        // A second Ctrl-C while draining ends at once (the default action).
        for (const [s, h] of handlers) process.removeListener(s, h);
        cap.stop({ drain }).then(resolve, (e: Error) => { failure = e; resolve(cap.stats()); });
      };
      for (const s of signals) {
        const h = (): void => end(true);
        handlers.push([s, h]);
        process.on(s, h);
      }
      cap.start(
        (f: CapturedFrame) => {
          dump.handle(f, true, digits);
          if (o.count !== undefined && dump.frames >= o.count) { cap.close(); end(false); }
        },
        (e: Error) => { failure = e; end(false); },
        () => { dump.out.flush(); writer?.flush(); },
      );
    });
  } finally {
    for (const [s, h] of handlers) process.removeListener(s, h);
    watch?.close();
    dump.out.flush();
    try { writer?.close(); } catch (e) { failure ??= e as Error; }
  }
  if (failure) throw new CliError(failure.message.split('\n')[0]!);
  if (o.endpoint !== undefined && dump.join) {
    try { dump.join.update((await lazy.state!.fetchState(o.endpoint)).state); } catch (e) { process.stderr.write(`smcdump: warning: final endpoint state unavailable, compared with the last one seen: ${(e as Error).message}\n`); }
  }
  const closing = dump.finish();
  dump.out.flush();
  const err = process.stderr;
  err.write(`${stats.captured} frames captured\n`);
  err.write(`${stats.received} frames received by filter\n`);
  err.write(`${stats.dropped} frames dropped by kernel\n`);
  if (stats.ifDropped > 0) err.write(`${stats.ifDropped} frames dropped by interface\n`);
  err.write(`${dump.summary()}\n`);
  if (closing) err.write(`${closing}\n`);
}

function listIfaces(o: Opts): void {
  const list: InterfaceInfo[] = lazy.live!.listInterfaces();
  const names = new Set(list.map((i) => i.name));
  const rdmaOnly = lazy.live!.rdmaDevices().filter((d: string) => !names.has(d));
  const out = new Out();
  if (o.json) {
    out.line(JSON.stringify({ libpcap: lazy.live!.pcapVersion(), interfaces: list, rdmaNotCapturable: rdmaOnly }));
  } else {
    list.forEach((i, n) => {
      const flags = [i.up ? 'Up' : '', i.running ? 'Running' : '', i.wireless ? 'Wireless' : '', i.loopback ? 'Loopback' : '',
        i.connection === 'connected' ? 'Connected' : i.connection === 'disconnected' ? 'Disconnected' : ''].filter(Boolean).join(', ');
      out.line(`${n + 1}.${i.name}${i.description ? ` (${i.description})` : ''}${flags ? ` [${flags}]` : ''}${i.addresses.length ? ` ${i.addresses.join(' ')}` : ''}`);
    });
    for (const d of rdmaOnly) out.line(`-.${d} (RDMA device; this libpcap cannot capture on it, see docs/smcdump.md)`);
  }
  out.flush();
}

/** Run as a command: one-line errors, exit status, never a stack trace. */
export function run(argv: string[]): void {
  main(argv).catch((e: unknown) => die('smcdump', e));
}
