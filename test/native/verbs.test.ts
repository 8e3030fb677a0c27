// The libibverbs addon (native/verbs) and the `ibverbs` provider on a machine without RDMA: the
// addon builds and loads (libibverbs is dlopen'ed, not linked), the unavailable path says why in
// plain words, and bad arguments are clear exceptions naming the verbs call, never a crash.
// With RDMA devices (the qemu lab over rxe) the same provider runs the verbs conformance suite.
import test from 'ava';
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import {
  IbverbsUnavailableError, decodeWrId, encodeWrId, ibverbsStatus, loadVerbsAddon, nativeRecvWr, nativeSendWr,
  openIbverbs, verbsAddonPath, type VerbsAddon,
} from '../../endpoint/verbs/ibverbs/index.js';
import { SendFlags, WrOpcode, type SendWr } from '../../endpoint/verbs/types.js';
import { sysTool } from './netns.js';

const built = existsSync(verbsAddonPath());
// In CI the addon must have been built by `npm ci`; elsewhere an unbuilt tree skips with the reason.
const needBuilt = built || process.env.CI ? test : test.skip;
const why = built ? '' : ' (skipped: not built; run `npm_config_nodedir=/usr node-gyp rebuild -C native/verbs`)';
const rdmaKernel = existsSync('/sys/class/infiniband');

needBuilt(`the addon builds and loads without linking libibverbs${why}`, (t) => {
  t.true(existsSync(verbsAddonPath()), `${verbsAddonPath()} is built`);
  const a = loadVerbsAddon();
  for (const f of ['status', 'deviceList', 'open', 'regMr', 'createCq', 'createQp', 'modifyQp', 'queryQp', 'postSend', 'postRecv'] as const) {
    t.is(typeof a[f], 'function', f);
  }
  const readelf = sysTool('readelf');
  if (readelf) {
    const r = spawnSync(readelf, ['-d', verbsAddonPath()], { encoding: 'utf8' });
    t.is(r.status, 0);
    t.notRegex(r.stdout, /NEEDED.*libibverbs/, 'libibverbs is opened with dlopen, not a link-time dependency');
  }
  const nm = sysTool('nm');
  if (nm) {
    const r = spawnSync(nm, ['-u', verbsAddonPath()], { encoding: 'utf8' });
    t.notRegex(r.stdout, /\bibv_/, 'no libibverbs symbol is left for the dynamic linker');
  }
});

needBuilt(`unavailable: no RDMA in this kernel is reported in plain words, in one line${why}`, async (t) => {
  const st = ibverbsStatus();
  if (st.available) { t.log(`RDMA devices present: ${st.devices.map((d) => d.name).join(', ')}`); t.pass(); return; }
  t.regex(st.reason!, /^libibverbs not available: /);
  t.false(st.reason!.includes('\n'));
  if (!rdmaKernel && loadVerbsAddon().status().loaded) {
    // ibv_get_device_list() fails with ENOSYS here: said as words, not as "errno 38".
    t.is(st.code, 'ENOSYS');
    t.regex(st.reason!, /this kernel has no RDMA support/);
    t.notRegex(st.reason!, /errno|\b38\b/);
  }
  const e = await t.throwsAsync(openIbverbs(), { instanceOf: IbverbsUnavailableError });
  t.is(e!.message, st.reason ?? '');
});

needBuilt(`unavailable: without libibverbs the addon still loads and says so${why}`, (t) => {
  const script = `
    const a = require(${JSON.stringify(verbsAddonPath())});
    const s = a.status();
    let list;
    try { a.deviceList(); list = 'no error'; } catch (e) { list = e.code + ' ' + e.message; }
    console.log(JSON.stringify({ s, list }));`;
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, SMCSCOPE_LIBIBVERBS: '/nonexistent/libibverbs.so.1' } });
  t.is(r.status, 0, r.stderr);
  const o = JSON.parse(r.stdout) as { s: { loaded: boolean; error: string }; list: string };
  t.false(o.s.loaded);
  t.regex(o.s.error, /^libibverbs not available: cannot load \/nonexistent\/libibverbs\.so\.1 \(/);
  t.regex(o.list, /^ENOLIB libibverbs not available: /);
});

needBuilt(`argument validation in the addon: TypeErrors and EBADF naming the verbs call${why}`, (t) => {
  const a = loadVerbsAddon();
  const fn = (): void => {};
  const te = (f: () => unknown, re: RegExp): void => { const e = t.throws(f, { instanceOf: TypeError }); t.regex(e!.message, re); };
  te(() => a.open(42 as unknown as string, fn), /^ibv_open_device: device name must be a string/);
  te(() => a.open('rxe0', 'x' as unknown as typeof fn), /^ibv_open_device: async event callback must be a function/);
  const badf = (f: () => unknown, re: RegExp): void => {
    const e = t.throws(f) as Error & { code?: string; call?: string };
    t.is(e.code, 'EBADF');
    t.regex(e.message, re);
  };
  badf(() => a.allocPd(123456), /^ibv_alloc_pd: no such device/);
  badf(() => a.regMr(123456, new Uint8Array(8), 1), /^ibv_reg_mr: no such PD/);
  badf(() => a.createCq(123456, 8, fn), /^ibv_create_cq: no such device/);
  badf(() => a.createQp(123456, 1, 2, {}), /^ibv_create_qp: no such PD/);
  badf(() => a.modifyQp(123456, {}, 0), /^ibv_modify_qp: no such QP/);
  badf(() => a.postSend(123456, []), /^ibv_post_send: no such QP/);
  badf(() => a.postRecv(123456, []), /^ibv_post_recv: no such QP/);
  badf(() => a.deregMr(123456), /^ibv_dereg_mr: no such MR/);
  badf(() => a.destroyCq(123456), /^ibv_destroy_cq: no such CQ/);
  te(() => a.queryPort('x' as unknown as number, 1), /^ibv_query_port: device handle must be a number/);
  te(() => (a as VerbsAddon).regMr(undefined as unknown as number, new Uint8Array(1), 0), /^ibv_reg_mr: PD handle must be a number/);
});

test('argument validation in the provider: work requests and wrIds', (t) => {
  // wrIds survive the trip through the 64-bit wr_id with their JavaScript type.
  for (const id of [0, 1, 2 ** 53 - 1, 0n, 5n, (1n << 63n) - 1n]) t.is(decodeWrId(encodeWrId(id)), id);
  for (const bad of [-1, 1.5, Number.NaN, -1n, 1n << 63n, '7' as unknown as number]) t.throws(() => encodeWrId(bad), { instanceOf: TypeError });

  const ok: SendWr = { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: 0x1000n, rkey: 7 }, sgList: [{ addr: 0x2000n, length: 64, lkey: 9 }] };
  t.like(nativeSendWr(ok), { opcode: WrOpcode.RDMA_WRITE, sendFlags: 2, rdma: { remoteAddr: 0x1000n, rkey: 7 } });
  t.like(nativeSendWr({ wrId: 2n, opcode: WrOpcode.SEND, sendFlags: SendFlags.INLINE, inlineData: new Uint8Array([1, 2]) }), { wrId: 2n | (1n << 63n) });
  const bad: Array<[SendWr, RegExp]> = [
    [{ wrId: 1, opcode: 99 as WrOpcode }, /opcode 99 is not/],
    [{ wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [] }, /RDMA opcodes need rdma/],
    [{ wrId: 1, opcode: WrOpcode.SEND_WITH_IMM }, /immData must be a 32-bit number/],
    [{ wrId: 1, opcode: WrOpcode.SEND, inlineData: new Uint8Array(4) }, /inlineData needs SendFlags.INLINE/],
    [{ wrId: 1, opcode: WrOpcode.SEND, sendFlags: SendFlags.INLINE, inlineData: new Uint8Array(4), sgList: [] }, /not both/],
    // a number address is accepted where exact (VerbsAddr, docs/uroce.md round 18); not a fraction
    [{ wrId: 1, opcode: WrOpcode.SEND, sgList: [{ addr: 5.5, length: 1, lkey: 1 }] }, /addr must be a non-negative bigint or safe integer/],
    [{ wrId: 1, opcode: WrOpcode.SEND, sendFlags: 0x100 }, /sendFlags 256/],
  ];
  for (const [wr, re] of bad) {
    const e = t.throws(() => nativeSendWr(wr, 3), { instanceOf: TypeError });
    t.regex(e!.message, /^ibv_post_send \(work request 3\): /);
    t.regex(e!.message, re);
  }
  t.throws(() => nativeRecvWr({ wrId: 1, sgList: 'x' as never }), { message: /^ibv_post_recv \(work request 0\): sgList must be an array/ });
});

test('argument validation in openIbverbs', async (t) => {
  await t.throwsAsync(openIbverbs({ device: 5 as unknown as string }), { instanceOf: TypeError, message: /device must be a non-empty string/ });
  await t.throwsAsync(openIbverbs(null as never), { instanceOf: TypeError });
});
