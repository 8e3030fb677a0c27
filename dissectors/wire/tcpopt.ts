// TCP experimental option (kind 254, also 253) with an RFC 6994 ExID — the option that
// announces SMC in SYN / SYN-ACK (formats.md §2): FE 06 E2 D4 C3 D9, ExID "SMCR" in EBCDIC.
// Input/output: the option bytes themselves (kind, length, data), no NOP padding.

import type { Decoded, Issue } from './common.js';
import { Tree, issue, hex, EBCDIC_SMCD, EBCDIC_SMCR } from './common.js';
import { addField } from './views/field.js';
import { TCPOPT_FIELDS, TCPOPT_EXID_AT, TcpOptView } from './views/tcpopt.js';

/** 32-bit ExID "SMCR" in EBCDIC — SMC-R (Linux sends and accepts only this one). */
export const SMCR_EXID = EBCDIC_SMCR;
/** 32-bit ExID "SMCD" in EBCDIC. */
export const SMCD_EXID = EBCDIC_SMCD;
const TCPOPT_EXP = 254;
const TCPOPT_EXP2 = 253;

/** Known 16-bit ExIDs (IANA "TCP Experimental Option Experiment Identifiers"). */
const EXID16: ReadonlyMap<number, string> = new Map([
  [0xf989, 'tfo'],      // TCP Fast Open, RFC 7413 experimental encoding
  [0x454e, 'tcp-eno'],  // TCP-ENO experimental encoding (RFC 8547)
]);

export interface TcpOpt {
  /** 254 (or 253). */
  kind: number;
  /** Length byte as on the wire (whole option incl. kind and length). */
  length: number;
  /** Experiment ID: 32-bit unless a known 16-bit ExID or fewer than 4 data bytes. */
  exid: number;
  /** Width of the ExID: 32, 16, or 0 when the option is too short to carry one. */
  exidBits: 0 | 16 | 32;
  /** 'smc-r', 'smc-d', or a known 16-bit experiment; undefined otherwise. */
  name?: string;
  /** Bytes after the ExID up to the option length (what is present of them). */
  data: Uint8Array;
}

function exidName(exid: number, bits: number): string | undefined {
  if (bits === 32) return exid === SMCR_EXID ? 'smc-r' : exid === SMCD_EXID ? 'smc-d' : undefined;
  if (bits === 16) return EXID16.get(exid);
  return undefined;
}

// Offsets of every field: ./views/tcpopt.ts. Decode, tree and encode go through one view.
const view = new TcpOptView();

/** Decode one experimental TCP option (`b` = kind, length, data). Never throws. */
export function decodeTcpOpt(b: Uint8Array, t?: Tree): Decoded<TcpOpt> {
  const issues: Issue[] = [];
  const v0 = view.reset(b, 0);
  const kind = v0.kind;
  const length = v0.length;
  if (b.length < 2) issue(issues, 'error', 'tcpopt.truncated', `truncated TCP option: ${b.length} bytes`, 0, b.length);
  if (kind !== TCPOPT_EXP && kind !== TCPOPT_EXP2 && b.length > 0) {
    issue(issues, 'error', 'tcpopt.kind', `option kind ${kind} is not an RFC 6994 experimental option (253/254)`, 0, 1);
  }
  // Bytes of the option that are actually present.
  const end = Math.min(b.length, Math.max(2, length));
  if (b.length >= 2) {
    if (length < 4) issue(issues, 'error', 'tcpopt.length', `option length ${length} < 4 (no room for an ExID)`, 1, 1);
    if (length > b.length) issue(issues, 'error', 'tcpopt.truncated', `option length ${length} > ${b.length} bytes present`, 1, 1);
    else if (length < b.length && length >= 2) issue(issues, 'note', 'tcpopt.trailing', `${b.length - length} bytes after the option`, length, b.length - length);
  }
  const avail = end - 2;
  let exid = 0;
  let exidBits: 0 | 16 | 32 = 0;
  if (avail >= 4 && !EXID16.has(v0.exid16)) { exid = v0.exid32; exidBits = 32; }
  else if (avail >= 2) { exid = v0.exid16; exidBits = 16; }
  const dataStart = TCPOPT_EXID_AT + exidBits / 8;
  const v: TcpOpt = { kind, length, exid, exidBits, data: b.subarray(Math.min(dataStart, end), end) };
  const name = exidName(exid, exidBits);
  if (name !== undefined) v.name = name;

  if (exidBits === 32 && (exid === SMCR_EXID || exid === SMCD_EXID)) {
    if (length & 1) issue(issues, 'warn', 'tcpopt.length', `SMC option with odd length ${length}: Linux ignores it (needs even length >= 6)`, 1, 1);
    else if (length > 6) issue(issues, 'note', 'tcpopt.length', `SMC option length ${length} (Linux sends 6)`, 1, 1);
  } else if (exidBits === 16 && exid === (SMCR_EXID >>> 16) && length < 6) {
    issue(issues, 'warn', 'tcpopt.length', `option length ${length} cuts the SMC ExID short: Linux ignores it (needs >= 6)`, 1, 1);
  }

  if (t) {
    const s = t.sub('TCP option', 0, Math.max(0, end), summarizeTcpOpt(v));
    const F = TCPOPT_FIELDS;
    addField(s, F.kind, kind);
    if (b.length >= 2) addField(s, F.length, length);
    if (exidBits) addField(s, exidBits === 32 ? F.exid32 : F.exid16, `0x${exid.toString(16).padStart(exidBits / 4, '0')}${name ? ` (${name})` : ''}`);
    if (v.data.length) s.add('Data', dataStart, v.data.length, hex(v.data));
  }
  return { value: v, issues };
}

/** Encode: kind, length byte as given, ExID (exidBits wide), data. */
export function encodeTcpOpt(v: TcpOpt): Uint8Array {
  const n = v.exidBits / 8;
  const out = new Uint8Array(TCPOPT_EXID_AT + n + v.data.length);
  const w = view.reset(out, 0);
  w.kind = v.kind & 0xff;
  w.length = v.length & 0xff;
  if (n === 4) w.exid32 = v.exid;
  else if (n === 2) w.exid16 = v.exid;
  out.set(v.data, TCPOPT_EXID_AT + n);
  return out;
}

/** The option Linux puts in SYN / SYN-ACK: FE 06 E2 D4 C3 D9 (or the SMC-D ExID). */
export function smcTcpOpt(which: 'smc-r' | 'smc-d' = 'smc-r'): TcpOpt {
  return { kind: TCPOPT_EXP, length: 6, exid: which === 'smc-r' ? SMCR_EXID : SMCD_EXID, exidBits: 32, name: which, data: new Uint8Array(0) };
}

/** True when Linux would accept this as the SMC option (kind 254, even length >= 6, ExID 0xE2D4C3D9). */
export function isLinuxSmcOption(v: TcpOpt): boolean {
  return v.kind === TCPOPT_EXP && v.length >= 6 && (v.length & 1) === 0 && v.exidBits === 32 && v.exid === SMCR_EXID;
}

/** `smc-r ExID 0xe2d4c3d9`; other experiments: `exp ExID 0x… len N data …`. */
export function summarizeTcpOpt(v: TcpOpt): string {
  const id = v.exidBits ? `ExID 0x${v.exid.toString(16).padStart(v.exidBits / 4, '0')}` : 'no ExID';
  let s = `${v.name ?? (v.kind === TCPOPT_EXP2 ? 'exp253' : 'exp')} ${id}`;
  if (v.name === 'smc-r' || v.name === 'smc-d') {
    if (v.length !== 6) s += ` len ${v.length}`;
  } else {
    s += ` len ${v.length}`;
    if (v.data.length) s += ` data ${hex(v.data, 0, 16)}${v.data.length > 16 ? '…' : ''}`;
  }
  if (v.kind !== TCPOPT_EXP && v.kind !== TCPOPT_EXP2) s += ` (kind ${v.kind})`;
  return s;
}
