// Hostile-peer helpers: raw TCP clients that speak broken or partial CLC, a normal SMC-R client
// whose echoed data is checked by hash, and /proc readings (RSS, open descriptors) of a server.
import { connect as netConnect, type Socket } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { encodeClc, decodeClc, CLC_PROPOSAL, PATH_R, PATH_N } from '../../dissectors/wire/clc.js';
import { connect, type SmcSocket } from '../../endpoint/index.js';
import { runTool, lastJson } from '../cli-tools/run.js';

export const UEID = 'SMCSCOPE-HOSTILE';

/** A plain TCP connection (no SMC), resolved once connected. */
export function rawConnect(host: string, port: number, localAddress?: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = netConnect({ host, port, allowHalfOpen: true, ...(localAddress ? { localAddress } : {}) });
    s.once('connect', () => { s.off('error', reject); resolve(s); });
    s.once('error', reject);
  });
}

/** Everything the peer sends until it closes (or `ms` pass), and when it closed (ms after the call, or undefined). */
export function drain(s: Socket, ms: number): Promise<{ bytes: Buffer; closedAfterMs: number | undefined }> {
  const t0 = Date.now();
  const got: Buffer[] = [];
  return new Promise((resolve) => {
    let fired = false;
    const done = (closed: boolean): void => { if (fired) return; fired = true; clearTimeout(t); resolve({ bytes: Buffer.concat(got), closedAfterMs: closed ? Date.now() - t0 : undefined }); };
    const t = setTimeout(() => { s.destroy(); done(false); }, ms);
    s.on('data', (d: Buffer) => got.push(d));
    s.on('error', () => undefined);
    // allowHalfOpen: the server's FIN is 'end' (no 'close' until we end too)
    s.once('end', () => { s.destroy(); done(true); });
    s.once('close', () => done(true));
    s.resume();
  });
}

/** An SMC-Rv2 Proposal from the RoCE GID of `addr` (what a real client sends first). */
export function proposal(addr: string): Uint8Array {
  return encodeClc({
    type: 'proposal', eyecatcher: 'SMCR', trailer: 'SMCR', typeCode: CLC_PROPOSAL, version: 2,
    typev2: PATH_R, typev1: PATH_N, peerId: '0@00:00:00:00:00:00', gid: '::', mac: '00:00:00:00:00:00',
    smcd: { ismGid: 0n, ismChid: 0, vendorOui: 0, vendorExp: 0n },
    v2: { eids: [UEID], release: 1, seidFlag: false, roceV2Gid: `::ffff:${addr}`, maxConns: 255, maxLinks: 1, featureMask: 1 },
  });
}

/** The reason of the CLC Decline `b` starts with (decoded by the analyzer's codec), or undefined. */
export function declineCode(b: Buffer): number | undefined {
  if (b.length < 8) return undefined;
  const d = decodeClc(new Uint8Array(b.subarray(0, Math.min(b.length, b.readUInt16BE(5)))));
  return d.value.type === 'decline' ? d.value.diagnosis >>> 0 : undefined;
}

/** A normal smcping (separate process) to the server: exit code, verdict mode, handshake ms. */
export async function normalPing(srv: string, port: number, from: string): Promise<{ code: number | null; mode?: string; totalMs?: number; err: string }> {
  const r = await runTool('smcping', [srv, '-p', String(port), '-b', from, '--ueid', UEID, '--no-tcp-option', '-c', '2', '-i', '0', '--json'], { timeoutMs: 30_000 });
  try {
    const j = lastJson(r.out);
    return { code: r.code, mode: j.attempts?.[0]?.verdict?.mode, totalMs: j.attempts?.[0]?.handshake?.totalMs, err: r.err };
  } catch {
    return { code: r.code, err: r.err + r.out };
  }
}

/** A connection through our own endpoint (SMC-R or fallback) that checks its echo by SHA-256. */
export class EchoCheck {
  private sent = createHash('sha256');
  private got = createHash('sha256');
  sentBytes = 0;
  gotBytes = 0;
  error: string | undefined;
  /** Called on every echo chunk and on error (roundTrip waits on it; no polling: 2000 pollers
   *  every 5 ms were most of the client's CPU in the flood and delayed its Proposals). */
  private wake: (() => void) | undefined;
  private constructor(readonly sock: SmcSocket) {
    sock.on('data', (d: Buffer) => { this.got.update(d); this.gotBytes += d.length; this.wake?.(); });
    sock.on('error', (e) => { this.error ??= e.message; this.wake?.(); });
    sock.on('close', () => this.wake?.());
  }

  static async open(srv: string, port: number, from: string, extra: Record<string, unknown> = {}): Promise<EchoCheck> {
    const s = await connect({ device: { provider: 'uroce', address: from }, ueids: [UEID], tcpOption: 'ignore', host: srv, port, localAddress: from, rmbSize: 16384, sndbufSize: 16384, ...extra });
    return new EchoCheck(s);
  }

  /** Send n random bytes and wait until they came back (or `ms` passed). */
  async roundTrip(n: number, ms = 10_000): Promise<boolean> {
    const b = randomBytes(n);
    this.sent.update(b);
    this.sentBytes += n;
    this.sock.write(b);
    await new Promise<void>((resolve) => {
      const done = (): void => { clearTimeout(t); this.wake = undefined; resolve(); };
      const t = setTimeout(done, ms);
      this.wake = () => { if (this.gotBytes >= this.sentBytes || this.error || this.sock.destroyed) done(); };
      this.wake();
    });
    return this.gotBytes === this.sentBytes;
  }

  /** Every byte came back, in order. */
  verify(): boolean {
    return this.gotBytes === this.sentBytes && this.sent.copy().digest('hex') === this.got.copy().digest('hex');
  }

  /** Why it fell back (code name and reason), for a TCP-mode connection. */
  fallbackWhy(): string | undefined { return this.sock.fallback ? `${this.sock.fallback.name}` : undefined; }

  close(): void { this.sock.destroy(); }
}

/** Resident set of a process, kB. */
export function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Open file descriptors of a process. */
export function fdCount(pid: number): number { return readdirSync(`/proc/${pid}/fd`).length; }

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
