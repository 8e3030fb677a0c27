// uroce's ICRC helpers against real Linux rxe traffic (pcaps/, qemu guests): the header model
// gives the kernel's ICRC, the IP ID the ICRC covers is recovered from the ICRC itself (a UDP
// socket never shows it), corruption is still caught, and the UDP source port is derived the
// way Linux derives it.
import test from 'ava';
import { join } from 'node:path';
import { ROOT, frameBytes, prng } from '../helpers.js';
import { readIcrc, checkIcrc } from '../../dissectors/wire/ib.js';
import { u16 } from '../../dissectors/wire/common.js';
import { IcrcChecker, NetHeader, solveIpId } from '../../endpoint/verbs/uroce/icrc.js';
import { roceSourcePort } from '../../endpoint/verbs/uroce/qp.js';

interface Rf { ib: Uint8Array; src: string; dst: string; sport: number; id: number; frame: Uint8Array }

function rxeFrames(): Rf[] {
  const out: Rf[] = [];
  for (const name of ['a-first-contact', 'b-second-contact', 'd-bulk-2MiB', 'e-testlink-teardown']) {
    for (const b of frameBytes(join(ROOT, 'pcaps', `${name}.pcap`))) {
      if (b.length < 60 || u16(b, 12) !== 0x0800 || b[23] !== 17 || u16(b, 36) !== 4791) continue;
      const ip = 14, udp = 34;
      const ipStr = (o: number): string => `${b[o]}.${b[o + 1]}.${b[o + 2]}.${b[o + 3]}`;
      out.push({ ib: b.subarray(udp + 8, ip + u16(b, ip + 2)), src: ipStr(ip + 12), dst: ipStr(ip + 16), sport: u16(b, udp), id: u16(b, ip + 4), frame: b });
    }
  }
  return out;
}

const frames = rxeFrames();

test('real rxe frames: the header model with the frame\'s IP ID gives the ICRC on the wire', (t) => {
  t.true(frames.length > 2000);
  for (const f of frames) {
    t.true(checkIcrc(f.frame, 14, 'v2').ok);
    t.is(new NetHeader(f.src, f.dst, f.sport).icrc(f.ib, f.id), readIcrc(f.ib));
  }
});

test('real rxe frames: the IP ID is recovered from the ICRC for every packet', (t) => {
  const chk = new IcrcChecker(frames[0]!.dst);
  let recovered = 0;
  for (const f of frames) {
    const h = new NetHeader(f.src, f.dst, f.sport);
    t.is(solveIpId((h.icrc(f.ib, 0) ^ readIcrc(f.ib)) >>> 0, f.ib.length), f.id);
    const c = new IcrcChecker(f.dst);
    t.is(c.check(f.ib, f.src, f.sport), f.id === 0 ? 'exact' : 'recovered');
    t.is(c.lastId, f.id);
    if (f.dst === chk.local && chk.check(f.ib, f.src, f.sport) === 'recovered') recovered++;
  }
  t.true(recovered > 100);
});

test('corrupted rxe frames are rejected (the 16 check bits left after recovering the ID)', (t) => {
  const rnd = prng(7);
  let accepted = 0, n = 0;
  for (let k = 0; k < 20; k++) {
    for (const f of frames) {
      if (n >= 40_000) break;
      const ib = f.ib.slice();
      let i = Math.floor(rnd() * ib.length);
      if (i === 4) i = 5; // BTH byte 4 (FECN/BECN/reserved) is not covered by the ICRC, by design
      ib[i] = ib[i]! ^ (1 + Math.floor(rnd() * 255));
      if (new IcrcChecker(f.dst).check(ib, f.src, f.sport) !== 'bad') accepted++;
      n++;
    }
  }
  t.log(`${accepted} of ${n} corrupted packets passed (expected about ${(n / 65536).toFixed(1)})`);
  t.true(accepted <= 5);
});

test('a source that sends IP ID 0 (uroce) is held to the full 32-bit check', (t) => {
  const f = frames[0]!;
  const h = new NetHeader(f.src, f.dst, f.sport);
  const ib = f.ib.slice();
  const c = new IcrcChecker(f.dst);
  // make it an ID-0 packet, as uroce sends
  const set = (p: Uint8Array): void => { const v = h.icrc(p, 0); p[p.length - 4] = v; p[p.length - 3] = v >>> 8; p[p.length - 2] = v >>> 16; p[p.length - 1] = v >>> 24; };
  set(ib);
  for (let i = 0; i < c.strictAfter; i++) t.is(c.check(ib, f.src, f.sport), 'exact');
  // now a packet whose ICRC is right only for some other IP ID is refused
  const other = f.ib.slice(); // real frame, ID != 0
  t.not(f.id, 0);
  t.is(c.check(other, f.src, f.sport), 'bad');
});

test('UDP source port as Linux derives it (rdma_get_udp_sport)', (t) => {
  t.is(roceSourcePort(0, 0x11, 0x11), 49441); // the port rxe used for QP 0x11 <-> 0x11 in pcaps/
  t.true(frames.every((f) => f.sport === 49441));
  for (let q = 1; q < 2000; q += 37) {
    const p = roceSourcePort(0, q, q + 5);
    t.true(p >= 0xc000 && p <= 0xffff);
  }
  t.is(roceSourcePort(0x12345, 1, 2), 0xc000 | ((0x12345 & 0x3fff) ^ (0x12345 >> 14)));
});
