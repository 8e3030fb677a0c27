// The completion queue's ring: completions live in slot objects the CQ owns and refills, so
// nothing it hands out may be one of them. pollOne()/poll() return copies the caller keeps;
// pollInto() fills the caller's entry completely (immData too). Checked against a wrapping,
// growing ring: a completion kept by the caller must not change when its slot is reused.

import test from 'ava';
import { CompletionQueue, emptyWc } from '../../endpoint/verbs/cq.js';
import { WcFlags, WcOpcode, WcStatus, type WorkCompletion } from '../../endpoint/verbs/types.js';

function push(cq: CompletionQueue, i: number): void {
  // every field depends on i; odd ones carry an immediate
  cq.pushWc(1000 + i, i % 3 === 0 ? WcStatus.SUCCESS : WcStatus.WR_FLUSH_ERR, i % 2 ? WcOpcode.RECV : WcOpcode.SEND, 10 * i, 7, 9 + i,
    i % 2 ? WcFlags.WITH_IMM : 0, i % 2 ? 0xabcd0000 + i : undefined, false);
}

function expected(i: number): WorkCompletion {
  const wc: WorkCompletion = {
    wrId: 1000 + i, status: i % 3 === 0 ? WcStatus.SUCCESS : WcStatus.WR_FLUSH_ERR, opcode: i % 2 ? WcOpcode.RECV : WcOpcode.SEND,
    vendorErr: 0, byteLen: 10 * i, qpNum: 7, srcQp: 9 + i, wcFlags: i % 2 ? WcFlags.WITH_IMM : 0,
  };
  if (i % 2) wc.immData = 0xabcd0000 + i;
  return wc;
}

test('CQ ring: polled completions are the caller\'s (unchanged when their slot is refilled), in order across wrap and growth', (t) => {
  const cq = new CompletionQueue(100);
  const kept: WorkCompletion[] = [];
  let next = 0, want = 0;
  // fill and drain in uneven steps: the head walks around the 16-slot ring, and pushes while
  // it is mid-ring make it grow (32, 64) with the queue starting in the middle
  for (const [add, take] of [[10, 7], [12, 3], [9, 20], [30, 25], [40, 46]] as const) {
    for (let k = 0; k < add; k++) push(cq, next++);
    for (let k = 0; k < take; k++) {
      const wc = k % 2 ? cq.poll(1)[0] : cq.pollOne();
      t.truthy(wc);
      t.deepEqual(wc, expected(want++));
      kept.push(wc!);
    }
  }
  t.is(cq.pending, 0);
  t.is(kept.length, 101);
  // every completion handed out is still what it was when it was polled
  for (let i = 0; i < kept.length; i++) t.deepEqual(kept[i], expected(i));
  t.is(new Set(kept).size, kept.length, 'no object handed out twice');
});

test('CQ pollInto: fills every field of the caller\'s entry (immData cleared when none), false when empty', (t) => {
  const cq = new CompletionQueue(4);
  const out = emptyWc();
  t.false(cq.pollInto(out));
  push(cq, 1); // with immediate
  push(cq, 2); // without
  t.true(cq.pollInto(out));
  t.deepEqual({ ...out }, { ...expected(1) });
  t.true(cq.pollInto(out));
  t.deepEqual({ ...out }, { ...expected(2), immData: undefined }, 'the previous immData does not stay behind');
  t.false(cq.pollInto(out));
  t.deepEqual({ ...out }, { ...expected(2), immData: undefined }, 'an empty poll leaves the entry alone');
});

test('CQ ring: overrun at cqe entries waiting, as before (later completions dropped and counted)', (t) => {
  const cq = new CompletionQueue(5);
  let overruns = 0;
  cq.onOverrun = () => { overruns++; };
  for (let i = 0; i < 8; i++) push(cq, i);
  t.is(cq.pending, 5);
  t.is(cq.dropped, 3);
  t.is(overruns, 1);
  for (let i = 0; i < 5; i++) t.deepEqual(cq.pollOne(), expected(i));
  t.is(cq.pollOne(), undefined);
});
