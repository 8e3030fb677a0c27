// The parts of the tracker's model the state comparison reads (cli/statejoin.ts follows no frames
// itself), checked on the bundled kernel captures against counts taken here straight from the
// decoded frames: per link end its SEND / RDMA WRITE messages and WRITE bytes (retransmissions
// excluded), its first request PSN, the last CONFIRM LINK it sent and the ADD LINK that announced
// its QP; per connection direction the first CDC's sequence number and the last CDC's
// write-blocked flag.
import test from 'ava';
import { FrameDecoder } from '../../dissectors/frame.js';
import { Tracker } from '../../dissectors/tracker/tracker.js';
import { gidOfIp } from '../../dissectors/wire/common.js';
import { opcodeInfo } from '../../dissectors/wire/ib.js';
import { pcapPath, readFrames } from '../helpers.js';

interface EndCount { sends: number; writes: number; writeBytes: number; firstPsn?: number; confirm?: { frame: number; qpn: number; gid: string }; add?: { frame: number; qpn: number; psn: number } }

const CAPTURES = ['a-first-contact', 'b-second-contact', 'd-bulk-2MiB', 'l-failover', 'l2-failover-client', 'o-urgent-stall', 'p-window-stall'];

for (const name of CAPTURES) {
  test(`${name}: Link.sent and the CDC fields of SmcDir agree with the frames`, async (t) => {
    const frames = await readFrames(pcapPath(name));
    const dec = new FrameDecoder();
    const tr = new Tracker();
    // independent counts, keyed by the receiving QP (destination GID, QPN)
    const ends = new Map<string, EndCount>();
    const psns = new Map<string, Set<number>>();
    const addLinks: Array<{ frame: number; gid: string; qpn: number; psn: number; response: boolean; rejected: boolean }> = [];
    const lastCdc = new Map<string, boolean>(); // sender GID | receiver token → write-blocked of its last CDC
    const firstSeq = new Map<string, number>();
    for (const f of frames) {
      const d = dec.decode(f);
      tr.feed(d);
      const r = d.roce;
      if (!r || !d.ip) continue;
      const info = opcodeInfo(r.ib.bth.opcode);
      if (info.transport !== 'RC' || info.isAck) continue;
      const src = r.grh ? r.grh.sgid : gidOfIp(d.ip.src), dst = r.grh ? r.grh.dgid : gidOfIp(d.ip.dst);
      const k = `${dst}|${r.ib.bth.destQp}`;
      let seen = psns.get(k);
      if (!seen) psns.set(k, seen = new Set());
      if (seen.has(r.ib.bth.psn)) continue; // a retransmission
      seen.add(r.ib.bth.psn);
      let e = ends.get(k);
      if (!e) ends.set(k, e = { sends: 0, writes: 0, writeBytes: 0 });
      e.firstPsn ??= r.ib.bth.psn;
      const starts = info.isFirst || info.isOnly;
      if (info.isSend && starts) e.sends++;
      if (info.isWrite) { e.writeBytes += r.ib.payload.length; if (starts) e.writes++; }
      for (const it of d.smc) {
        if (it.proto === 'llc' && it.value.kind === 'confirm_link') e.confirm = { frame: d.n, qpn: it.value.qpn, gid: it.value.gid };
        if (it.proto === 'llc' && it.value.kind === 'add_link') addLinks.push({ frame: d.n, gid: it.value.gid, qpn: it.value.qpn, psn: it.value.psn, response: it.value.response, rejected: it.value.rejected });
        if (it.proto === 'cdc' && !it.value.prodFlags.failoverValidation) {
          const ck = `${src}|${it.value.token}`;
          lastCdc.set(ck, it.value.prodFlags.writeBlocked);
          if (!firstSeq.has(ck)) firstSeq.set(ck, it.value.seq);
        }
      }
    }
    tr.finish();
    let checked = 0, confirms = 0, adds = 0;
    for (const [k, e] of ends) {
      const [gid, qpn] = [k.slice(0, k.lastIndexOf('|')), Number(k.slice(k.lastIndexOf('|') + 1))];
      const hit = tr.linkOfQp(gid, qpn);
      if (!hit) continue; // a QP of a link the tracker dropped (a rejected ADD LINK)
      const s = hit.link.sent[hit.end === 1 ? 0 : 1];
      t.deepEqual([s.sends, s.writes, s.writeBytes, s.first?.psn], [e.sends, e.writes, e.writeBytes, e.firstPsn], `${hit.link.name} towards ${k}`);
      t.deepEqual(s.confirm && { frame: s.confirm.frame, qpn: s.confirm.qpn, gid: s.confirm.gid }, e.confirm, `${hit.link.name}: CONFIRM LINK towards ${k}`);
      checked++;
      if (e.confirm) confirms++;
    }
    t.true(checked >= 2 && confirms >= 2, `${checked} link ends compared, ${confirms} with a CONFIRM LINK`);
    // every accepted ADD LINK names the QP of one end of a link, with its PSN
    for (const a of addLinks.filter((x) => !x.rejected)) {
      const hit = tr.linkOfQp(a.gid, a.qpn);
      if (!hit) continue;
      t.like(hit.link.sent[hit.end].add, { frame: a.frame, qpn: a.qpn, psn: a.psn, response: a.response }, `ADD LINK in frame ${a.frame}`);
      adds++;
    }
    // the failover captures bring a second link up with ADD LINK (request and response)
    if (name.includes('failover')) t.true(adds >= 2, `${adds} ADD LINKs compared`);
    let dirs = 0;
    for (const g of tr.groups) {
      for (const c of g.conns) {
        for (const d of [0, 1] as const) {
          const w = c.dirs[d], token = c.sides[1 - d]!.token;
          if (w.cdcs === 0 || token === undefined) continue;
          const ck = `${c.sides[d].gid}|${token}`;
          t.is(w.firstSeq, firstSeq.get(ck), `connection ${c.index} dir ${d}: first CDC seq`);
          t.is(w.lastWriteBlocked, lastCdc.get(ck), `connection ${c.index} dir ${d}: last CDC's write-blocked`);
          t.is(w.seqGaps, 0, `connection ${c.index} dir ${d}: no CDC sequence gap in a clean capture`);
          dirs++;
        }
      }
    }
    t.true(dirs >= 2, `${dirs} connection directions compared`);
  });
}
