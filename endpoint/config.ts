// Options of an SMC-R endpoint and their defaults (Linux's values where Linux has one).

import { hostname } from 'node:os';
import type { DeviceSpec } from './verbs/index.js';
import type { Trace } from './trace.js';

export interface SmcOptions {
  /** The RDMA device: `{ provider: 'uroce', address: '10.0.0.1' }` or `{ provider: 'ibverbs', … }`. */
  device: DeviceSpec;
  /** More RDMA devices for a second link per link group (ADD LINK, SMC-Rv2); failover needs one. */
  alternates?: DeviceSpec[];
  /** User EIDs (SMC-Rv2 needs one in common with the peer; Linux: `smc_ueid add`). */
  ueids?: string[];
  /** SMC-R versions offered/accepted, preferred first (default [2, 1]). */
  versions?: Array<1 | 2>;
  /** SMC v2 release offered (0 = v2.0, 1 = v2.1; default 1). */
  release?: 0 | 1;
  /** Bytes of each connection's RMB (receive ring) and send buffer; powers of two ≥ 16 KiB (default 64 KiB). */
  rmbSize?: number;
  sndbufSize?: number;
  /** Connections per link group and links per group offered (v2.1; Linux default 255 and 2). */
  maxConns?: number;
  maxLinks?: number;
  /** CLC message wait (Linux CLC_WAIT_TIME 2 s), LLC response wait (2 s), TEST LINK interval
   *  (30 s), idle link group lifetime (10 min). */
  clcTimeoutMs?: number;
  llcTimeoutMs?: number;
  testLinkMs?: number;
  idleLinkGroupMs?: number;
  /** Server: handshakes past the Proposal at once (QP bring-up, buffers, LLC); a Proposal that
   *  finds no free slot within half the CLC timeout is declined (MEM) and goes on as TCP. */
  maxHandshakes?: number;
  /** Server: accepted TCP connections still in their handshake (waiting for a Proposal or a
   *  slot); beyond it a new connection is reset at once, like a full listen backlog. */
  maxPendingConnections?: number;
  /** After the peer's FIN (or end of its CLC socket) on an SMC-R connection, how long to wait
   *  for its SMC close (CDC done/closed) before aborting: a Linux peer sends the CDC right after
   *  its FIN, a peer whose process died never does. */
  finGraceMs?: number;
  /**
   * How TCP option 254 is handled: 'ebpf' (default) loads the sock_ops program and requires the
   * peer's option before any CLC, as RFC 7609 says; 'ignore' skips it and always tries CLC
   * (for peers known to speak SMC; not what kernel SMC does — a peer without SMC then sees
   * CLC bytes as data).
   */
  tcpOption?: 'ebpf' | 'ignore';
  /** Host name in the first-contact extension (default os.hostname()). */
  hostname?: string;
  /** Log sink for protocol events (default: none). */
  log?: (line: string) => void;
  /** Protocol trace: every CLC and LLC message sent and received (endpoint/trace.ts; default: none). */
  trace?: Trace;
}

export type ResolvedOptions = Required<Omit<SmcOptions, 'log' | 'trace'>> & { log: (line: string) => void; trace?: Trace };

function positiveInt(v: number | undefined, dflt: number, what: string, max = 1_000_000): number {
  const n = v ?? dflt;
  if (!Number.isInteger(n) || n < 1 || n > max) throw new RangeError(`${what} ${n}: an integer from 1 to ${max}`);
  return n;
}

const MIN_BUF = 16 * 1024;

function bufSize(v: number | undefined, what: string): number {
  const n = v ?? 64 * 1024;
  if (!Number.isInteger(n) || n < MIN_BUF || n > 512 * 1024 * 1024 || (n & (n - 1)) !== 0) {
    throw new RangeError(`${what} ${n}: a power of two from 16 KiB to 512 MiB`);
  }
  return n;
}

export function resolveOptions(o: SmcOptions): ResolvedOptions {
  const versions = o.versions ?? [2, 1];
  if (versions.length === 0 || versions.some((v) => v !== 1 && v !== 2)) throw new RangeError('versions: a non-empty list of 1 and 2');
  const ueids = (o.ueids ?? []).map((u) => u.toUpperCase());
  for (const u of ueids) if (u.length === 0 || u.length > 32) throw new RangeError(`UEID "${u}": 1 to 32 characters`);
  const maxConns = o.maxConns ?? 255;
  const maxLinks = o.maxLinks ?? 2;
  if (!Number.isInteger(maxConns) || maxConns < 16 || maxConns > 255) throw new RangeError(`maxConns ${maxConns}: 16…255 (Linux SMC_CONN_PER_LGR_MIN/MAX)`);
  if (!Number.isInteger(maxLinks) || maxLinks < 1 || maxLinks > 8) throw new RangeError(`maxLinks ${maxLinks}: 1…8`);
  return {
    device: o.device,
    alternates: o.alternates ?? [],
    ueids,
    versions,
    release: o.release ?? 1,
    rmbSize: bufSize(o.rmbSize, 'rmbSize'),
    sndbufSize: bufSize(o.sndbufSize, 'sndbufSize'),
    maxConns,
    maxLinks,
    clcTimeoutMs: o.clcTimeoutMs ?? 2000,
    llcTimeoutMs: o.llcTimeoutMs ?? 2000,
    testLinkMs: o.testLinkMs ?? 30_000,
    idleLinkGroupMs: o.idleLinkGroupMs ?? 600_000,
    maxHandshakes: positiveInt(o.maxHandshakes, 64, 'maxHandshakes'),
    maxPendingConnections: positiveInt(o.maxPendingConnections, 4096, 'maxPendingConnections'),
    finGraceMs: positiveInt(o.finGraceMs, 1500, 'finGraceMs', 3_600_000),
    tcpOption: o.tcpOption ?? 'ebpf',
    hostname: (o.hostname ?? hostname()).slice(0, 32),
    log: o.log ?? (() => {}),
    ...(o.trace ? { trace: o.trace } : {}),
  };
}

/** RMBE size code of CLC (bytes = 2^(code + 14)). */
export function sizeCode(bytes: number): number { return Math.max(0, Math.round(Math.log2(bytes)) - 14); }
export function sizeFromCode(code: number): number { return 2 ** (code + 14); }
