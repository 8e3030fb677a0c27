// Command-line argument parsers and formatters shared by smcping and smcperf.

import { InvalidArgumentError } from 'commander';
import { createSocket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { once } from 'node:events';
import { isIPv4 } from 'node:net';
import type { DeviceSpec } from '../../endpoint/verbs/index.js';
import { CliError } from '../output.js';
import { fmtBytes, fmtSize as fmtSizeIn, OPTION_UNITS } from '../../dissectors/wire/common.js';

export function intArg(name: string, min: number, max: number) {
  return (v: string): number => {
    const n = Number(v);
    if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return n;
  };
}

export function numArg(name: string, min: number, max: number) {
  return (v: string): number => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be a number from ${min} to ${max}`);
    return n;
  };
}

/** "64", "4k", "64K", "1m", "2g" (binary multiples) → bytes. */
export function parseSize(v: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b)?\s*$/i.exec(v);
  if (!m) throw new InvalidArgumentError(`"${v}" is not a size (e.g. 64, 4k, 64k, 1m)`);
  const mult = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g'];
  const n = Math.round(Number(m[1]) * mult);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError(`"${v}" is not a positive size`);
  return n;
}

export function sizeArg(name: string, min: number, max: number) {
  return (v: string): number => {
    const n = parseSize(v);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be from ${fmtBytes(min)} to ${fmtBytes(max)}`);
    return n;
  };
}

/** 65536 → "64k", 1000 → "1000" (the way --sizes takes them). */
export function fmtSize(n: number): string { return fmtSizeIn(n, OPTION_UNITS); }

export { fmtBytes };

export function collect(v: string, prev: string[] | undefined): string[] { return [...(prev ?? []), v]; }

export function versionsArg(v: string): Array<1 | 2> {
  const list = v.split(',').map((s) => s.trim()).filter(Boolean);
  if (!list.length || list.some((s) => s !== '1' && s !== '2') || new Set(list).size !== list.length) {
    throw new InvalidArgumentError('versions: a comma list of 1 and 2, preferred first (e.g. 2,1)');
  }
  return list.map((s) => Number(s) as 1 | 2);
}

/** --device uroce:ADDR | ibverbs[:NAME] */
export function deviceArg(v: string): DeviceSpec {
  const i = v.indexOf(':');
  const kind = (i < 0 ? v : v.slice(0, i)).toLowerCase();
  const rest = i < 0 ? '' : v.slice(i + 1);
  if (kind === 'uroce') {
    if (!isIPv4(rest)) throw new InvalidArgumentError('uroce needs a local IPv4 address: --device uroce:10.0.0.1');
    return { provider: 'uroce', address: rest };
  }
  if (kind === 'ibverbs') return rest ? { provider: 'ibverbs', device: rest } : { provider: 'ibverbs' };
  throw new InvalidArgumentError(`unknown device "${v}" (uroce:ADDR or ibverbs[:NAME])`);
}

/** The first IPv4 address of a host name (uroce speaks IPv4 only). */
export async function resolveHost(host: string): Promise<string> {
  if (isIPv4(host)) return host;
  try {
    return (await lookup(host, { family: 4 })).address;
  } catch {
    throw new CliError(`${host}: cannot resolve to an IPv4 address`, 2);
  }
}

/** The source address the kernel would use toward `host` (a UDP connect sends nothing). */
export async function sourceAddressFor(host: string): Promise<string> {
  const s = createSocket('udp4');
  try {
    s.connect(9, host);
    await once(s, 'connect');
    return s.address().address;
  } catch (e) {
    throw new CliError(`no route to ${host}: ${(e as Error).message}`, 2);
  } finally {
    s.close();
  }
}
