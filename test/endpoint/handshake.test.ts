// CLC handshake + link group bring-up between two of our endpoints over real uroce QPs on
// loopback: first contact, subsequent contact on the same link group, declines.
import test from 'ava';
import { createHash } from 'node:crypto';
import { openStacks, tcpPair, addrOf } from './stacks.js';
import type { HandshakeResult } from '../../endpoint/clc/handshake.js';
import type { CdcConnection } from '../../endpoint/cdc/connection.js';

const UEID = 'SMCSCOPE-TEST';

function collect(conn: CdcConnection, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let got = 0;
    const pull = (): void => {
      for (;;) {
        const b = conn.read();
        if (!b) break;
        parts.push(Buffer.from(b));
        got += b.length;
      }
      if (got >= n) resolve(Buffer.concat(parts));
    };
    conn.on('readable', pull);
    conn.once('abort', (r: string) => reject(new Error(r)));
    pull();
  });
}

test.serial('first then subsequent contact (v2.1), data both ways', async (t) => {
  const [a, b] = await openStacks({ ueids: [UEID] });
  try {
    for (let i = 0; i < 3; i++) {
      const [c, s, srv] = await tcpPair(addrOf(a), addrOf(b));
      const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]) as [HandshakeResult, HandshakeResult];
      t.is(rc.mode, 'smcr', rc.mode === 'tcp' ? rc.reason : '');
      t.is(rs.mode, 'smcr', rs.mode === 'tcp' ? rs.reason : '');
      if (rc.mode !== 'smcr' || rs.mode !== 'smcr') return;
      t.is(rc.firstContact, i === 0);
      t.is(rs.firstContact, i === 0);
      t.is(rc.version, 2);
      t.is(rc.release, 1);
      t.is(rc.lg.role, 'client');
      t.is(a.linkGroups.size, 1);
      t.is(b.linkGroups.size, 1);
      const cc = a.attach(rc);
      const sc = b.attach(rs);
      const msg = Buffer.alloc(200_000 + i);
      for (let k = 0; k < msg.length; k++) msg[k] = (k * 7 + i) & 0xff;
      let off = 0;
      const pump = (): void => { while (off < msg.length) { const n = cc.write(msg.subarray(off)); if (n === 0) return; off += n; } };
      cc.on('writable', pump);
      pump();
      const got = await collect(sc, msg.length);
      t.is(createHash('sha256').update(got).digest('hex'), createHash('sha256').update(msg).digest('hex'));
      sc.write(Buffer.from('pong'));
      t.is((await collect(cc, 4)).toString(), 'pong');
      await Promise.all([cc.close(), sc.close()]);
      c.destroy(); s.destroy(); srv.close();
    }
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('no common UEID and v1 disabled: server declines NOUEID, both fall back', async (t) => {
  const [a, b] = await openStacks({ ueids: ['CLIENT-ONLY'], versions: [2] }, { ueids: ['SERVER-ONLY'], versions: [2] });
  try {
    const [c, s, srv] = await tcpPair(addrOf(a), addrOf(b));
    const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
    t.like(rc, { mode: 'tcp', code: 0x03030008, declinedBy: 'peer' });
    t.like(rs, { mode: 'tcp', code: 0x03030008, declinedBy: 'local' });
    // the TCP connection still carries data after the decline
    c.write('after decline');
    const [d] = await new Promise<[Buffer]>((r) => { s.once('data', (x: Buffer) => r([x])); s.resume(); });
    t.is(d.toString(), 'after decline');
    c.destroy(); s.destroy(); srv.close();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test.serial('v1 only: SMC-Rv1 with prefix check', async (t) => {
  const [a, b] = await openStacks({ versions: [1] }, { versions: [1] });
  try {
    const [c, s, srv] = await tcpPair(addrOf(a), addrOf(b));
    const [rc, rs] = await Promise.all([a.handshake('client', c), b.handshake('server', s)]);
    t.like(rc, { mode: 'smcr', version: 1, firstContact: true });
    t.like(rs, { mode: 'smcr', version: 1, firstContact: true });
    c.destroy(); s.destroy(); srv.close();
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});
