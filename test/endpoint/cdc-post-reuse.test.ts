// The records a CDC connection keeps per posted CDC (what its acknowledgement needs, and the
// callback handed to the transport) are reused once the transport has called back (its
// contract: once per CDC). The rule under test: a record is free only after that call, never
// while the transport still holds its callback, so every acknowledgement reports its own CDC's
// cursor and sequence number. A transport that holds the callbacks and calls them later shows it.

import test from 'ava';
import { CdcConnection } from '../../endpoint/cdc/connection.js';
import type { CdcTransport } from '../../endpoint/cdc/transport.js';
import type { Mr } from '../../endpoint/verbs/index.js';

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

test('CDC post records: freed only when acknowledged, then reused for the next CDC; each acknowledgement reports its own CDC', async (t) => {
  const held: Array<(e: Error | undefined) => void> = [];
  const seqs: number[] = [];
  const transport: CdcTransport = {
    write: () => undefined,
    sendCdc: () => Promise.reject(new Error('the callback API is used')),
    sendCdcCb: (msg, done) => { seqs.push((msg[2]! << 8) | msg[3]!); held.push(done); },
  };
  const size = 16384;
  const conn = new CdcConnection({
    localToken: 1, peerToken: 2, transport,
    buffers: { rmbe: new Uint8Array(size), sndbuf: { buffer: new Uint8Array(size), length: size } as unknown as Mr, peerRmbeSize: size },
  });
  const tx = (): { inFlight: number; finSeq: number } => conn.state().tx;

  conn.write(new Uint8Array(100));
  await tick();
  conn.write(new Uint8Array(200));
  await tick();
  t.deepEqual(seqs, [1, 2], 'two data CDCs posted, the second while the first is unacknowledged');
  t.not(held[0], held[1], 'each CDC in flight has a record (and callback) of its own');
  t.is(tx().inFlight, 300);
  conn.write(new Uint8Array(300)); // corked: two CDCs in flight
  await tick();
  t.deepEqual(seqs, [1, 2]);

  // CDC 1 acknowledged: its own cursor and sequence number, not CDC 2's
  held[0]!(undefined);
  t.is(tx().finSeq, 1);
  // the acknowledgement uncorked the 300 bytes: CDC 3 went out in the record CDC 1 left
  t.deepEqual(seqs, [1, 2, 3]);
  t.is(held[2], held[0], 'the freed record (same callback) carries CDC 3');
  t.is(tx().inFlight, 500);

  held[1]!(undefined);
  t.is(tx().finSeq, 2);
  t.is(tx().inFlight, 300, 'CDC 2 acknowledged up to its own cursor');
  held[2]!(undefined);
  t.is(tx().finSeq, 3);
  t.is(tx().inFlight, 0);
  t.false(conn.aborted);
});
