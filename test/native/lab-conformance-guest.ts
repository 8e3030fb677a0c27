// Runs INSIDE a lab guest (Linux 6.12, rdma_rxe on eth0), bundled with esbuild by
// `lab-ibverbs.ts --conformance` and started with the host's node binary from /out: the verbs
// conformance suite (test/verbs/cases-*.ts — the very cases ava runs on uroce) on the ibverbs
// provider. Two devices are opened on rxe0 through openDevice({ provider: 'ibverbs' }); their
// QPs talk to each other over rxe's local loopback (both use the IPv4-mapped RoCE v2 GID).
//
// Output, one line per case: "ok - ibverbs: TITLE (1.23 s)", "not ok - …" with every failed
// assertion, "skip - …: reason" (a uroce-only feature) or "differs - …" (a documented rxe or
// provider difference, with what was observed; it must still fail the way documented, or it
// is reported "not ok" so the list stays honest). Then the async events each case saw, and
// "N passed, N failed". Results also go to /out/conformance.json.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isDeepStrictEqual, inspect } from 'node:util';
import { openDevice, type AsyncEvent, type Device } from '../../endpoint/verbs/index.js';
import { ibverbsStatus } from '../../endpoint/verbs/ibverbs/index.js';
import { conformanceCases } from '../verbs/cases-conformance.js';
import { errorCases } from '../verbs/cases-errors.js';
import { faultCases, faultsUnsupported } from '../verbs/cases-faults.js';
import type { Assert, Case, Devices, SuiteProvider } from '../verbs/common.js';

const DEVICE = process.env.IBV_DEVICE ?? 'rxe0';
const CASE_TIMEOUT_MS = 240_000;

/** rxe's per-port counters (/sys/class/infiniband/DEV/ports/1/hw_counters): device-wide. */
function hwCounters(dev: Device): Record<string, number> {
  const dir = `/sys/class/infiniband/${dev.name}/ports/1/hw_counters`;
  const out: Record<string, number> = {};
  for (const f of readdirSync(dir)) {
    const v = Number(readFileSync(`${dir}/${f}`, 'utf8').trim());
    if (Number.isFinite(v)) out[f] = v;
  }
  return out;
}

const ibverbs: SuiteProvider = {
  name: 'ibverbs',
  qpPacketStats: false,
  counters: hwCounters,
  gidPattern: /^::ffff:10\.55\.0\.\d+$/,
  exactSolicited: false,
};

/**
 * Cases whose outcome on rxe differs from uroce's (which follows the IB spec there), with the
 * rxe behaviour. Each still runs; its failed assertions are printed as the observed behaviour.
 */
const NO_QP_EVENT = 'rxe raises no IBV_EVENT_QP_ACCESS_ERR (nor any QP async event: rxe_qp_error() sets ERR and drains, nothing else)';
const KNOWN: Record<string, string> = {
  'COMM_EST async event on the first packet':
    'rxe raises no IBV_EVENT_COMM_EST (IB asks for it only when a QP still in RTR receives its first packet; both QPs here are in RTS by then, uroce raises it anyway)',
  'RDMA WRITE with a bad rkey → IBV_WC_REM_ACCESS_ERR': `REM_ACCESS_ERR, flush and both QPs in ERR as required, but ${NO_QP_EVENT}`,
  'RDMA WRITE past the end of the MR → IBV_WC_REM_ACCESS_ERR': `REM_ACCESS_ERR, flush and both QPs in ERR as required, but ${NO_QP_EVENT}`,
  'RDMA WRITE before the start of the MR → IBV_WC_REM_ACCESS_ERR': `REM_ACCESS_ERR, flush and both QPs in ERR as required, but ${NO_QP_EVENT}`,
  'RDMA WRITE to an MR without remote write access → IBV_WC_REM_ACCESS_ERR': `REM_ACCESS_ERR, flush and both QPs in ERR as required, but ${NO_QP_EVENT}`,
  'RDMA WRITE to a QP without remote write access → IBV_WC_REM_ACCESS_ERR':
    'rxe checks the QP\'s access flags as an opcode check: NAK "invalid request", so the requester gets IBV_WC_REM_INV_REQ_ERR (9), not IBV_WC_REM_ACCESS_ERR (10); and no QP async event',
  'SEND larger than the receive buffer → IBV_WC_REM_INV_REQ_ERR / IBV_WC_LOC_LEN_ERR':
    'rxe NAKs "remote operational error": the sender gets IBV_WC_REM_OP_ERR (11), not IBV_WC_REM_INV_REQ_ERR (9), and the receive completes IBV_WC_LOC_QP_OP_ERR (2), not IBV_WC_LOC_LEN_ERR (1)',
  'bad lkey in a send SGE → IBV_WC_LOC_PROT_ERR, QP to ERR':
    'rxe moves the QP to ERR and then flushes every outstanding WR, so all three complete IBV_WC_WR_FLUSH_ERR: the SEND before the bad WR (sent, not yet ACKed) and the bad WR itself, whose IBV_WC_LOC_PROT_ERR is never reported',
  'receive WR with a bad lkey → IBV_WC_LOC_PROT_ERR there, IBV_WC_REM_OP_ERR at the sender':
    'rxe does not look up the lkey of a receive SGE when 0 bytes land in it: the zero-length SEND completes IBV_WC_SUCCESS at both ends',
};

// ---- a tiny runner with ava's assertion semantics (failures are recorded and the case goes on) --
class Failure extends Error {}
function makeAssert(fails: string[], logs: string[]): Assert {
  const fail = (what: string, msg?: string): false => { fails.push(msg ? `${msg}: ${what}` : what); return false; };
  const show = (v: unknown): string => inspect(v, { depth: 4, breakLength: 200 });
  const like = (actual: unknown, sel: unknown, path: string): string | undefined => {
    if (sel !== null && typeof sel === 'object' && !Array.isArray(sel) && !(sel instanceof Uint8Array)) {
      if (actual === null || typeof actual !== 'object') return `${path || 'value'} is ${show(actual)}`;
      for (const [k, v] of Object.entries(sel)) {
        const r = like((actual as Record<string, unknown>)[k], v, path ? `${path}.${k}` : k);
        if (r) return r;
      }
      return undefined;
    }
    return isDeepStrictEqual(actual, sel) ? undefined : `${path} is ${show(actual)}, expected ${show(sel)}`;
  };
  const t = {
    is: (a: unknown, e: unknown, m?: string) => Object.is(a, e) || fail(`${show(a)} is not ${show(e)}`, m),
    not: (a: unknown, e: unknown, m?: string) => !Object.is(a, e) || fail(`${show(a)} should differ`, m),
    true: (a: unknown, m?: string) => a === true || fail(`${show(a)} is not true`, m),
    truthy: (a: unknown, m?: string) => !!a || fail(`${show(a)} is not truthy`, m),
    regex: (s: string, re: RegExp, m?: string) => re.test(s) || fail(`${show(s)} does not match ${re}`, m),
    deepEqual: (a: unknown, e: unknown, m?: string) => isDeepStrictEqual(a, e) || fail(`${show(a)} differs from ${show(e)}`, m),
    like: (a: unknown, sel: unknown, m?: string) => { const r = like(a, sel, ''); return r === undefined || fail(r, m); },
    pass: () => true,
    log: (...v: unknown[]) => { logs.push(v.map((x) => (typeof x === 'string' ? x : show(x))).join(' ')); },
    throws: (fn: () => unknown, exp: { instanceOf?: new (...a: never[]) => unknown; code?: string | number; message?: string | RegExp | ((m: string) => boolean); name?: string } = {}, m?: string) => {
      let err: unknown;
      let threw = false;
      try { fn(); } catch (e) { err = e; threw = true; }
      if (!threw) { fail('did not throw', m); return undefined; }
      const e = err as { code?: unknown; message?: string; name?: string };
      if (exp.instanceOf && !(err instanceof exp.instanceOf)) { fail(`threw ${show(err)}, not an instance of ${exp.instanceOf.name}`, m); return undefined; }
      if (exp.code !== undefined && e.code !== exp.code) { fail(`threw code ${show(e.code)} (${e.message}), expected ${show(exp.code)}`, m); return undefined; }
      if (exp.name !== undefined && e.name !== exp.name) { fail(`threw ${e.name}, expected ${exp.name}`, m); return undefined; }
      const msg = String(e.message);
      const okMsg = exp.message === undefined ? true : typeof exp.message === 'string' ? msg === exp.message : exp.message instanceof RegExp ? exp.message.test(msg) : exp.message(msg);
      if (!okMsg) { fail(`message ${show(msg)} does not match ${String(exp.message)}`, m); return undefined; }
      return err;
    },
  };
  for (const f of Object.values(t)) (f as unknown as { skip: () => void }).skip = () => {};
  return t as unknown as Assert;
}

interface Result { title: string; outcome: 'ok' | 'not ok' | 'skip' | 'differs'; ms: number; fails: string[]; logs: string[]; events: string[]; note?: string }

async function runCase(c: Case, devs: Devices): Promise<Result> {
  const fails: string[] = [];
  const logs: string[] = [];
  const events: string[] = [];
  const on = (who: string) => (e: AsyncEvent): void => { events.push(`${who}:${e.reason ?? e.type}${e.qp ? ` qp ${e.qp.qpNum}` : ''}`); };
  const la = on('a'), lb = on('b');
  devs.a.on('async', la); devs.b.on('async', lb);
  const t0 = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      Promise.resolve().then(() => c.run(makeAssert(fails, logs))),
      new Promise((_, rej) => { timer = setTimeout(() => rej(new Failure(`case timeout after ${CASE_TIMEOUT_MS / 1000} s`)), CASE_TIMEOUT_MS); }),
    ]);
  } catch (e) {
    fails.push(`threw: ${e instanceof Error ? (e instanceof Failure ? e.message : (e.stack ?? e.message).split('\n').slice(0, 3).join(' | ')) : inspect(e)}`);
  } finally {
    clearTimeout(timer);
  }
  const ms = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 50));
  devs.a.off('async', la); devs.b.off('async', lb);
  const title = `${ibverbs.name}: ${c.title}`;
  const known = KNOWN[c.title];
  if (known) {
    if (fails.length) return { title, outcome: 'differs', ms, fails, logs, events, note: known };
    return { title, outcome: 'not ok', ms, fails: [`passes, but is listed as a known rxe difference (${known}): update KNOWN`], logs, events };
  }
  return { title, outcome: fails.length ? 'not ok' : 'ok', ms, fails, logs, events };
}

const results: Result[] = [];
const st = ibverbsStatus();
console.log(`guest: ${st.available ? `devices ${st.devices.map((d) => d.name).join(', ')}` : st.reason}`);
if (!st.available) { console.log('not ok - ibverbs unavailable'); console.log('0 passed, 1 failed'); process.exit(1); }
const devs = {
  a: await openDevice({ provider: 'ibverbs', device: DEVICE }),
  b: await openDevice({ provider: 'ibverbs', device: DEVICE }),
} satisfies Devices;
const g = (devs.a as Device & { sourceGid(p: number): { index: number; gid: string } }).sourceGid(1);
console.log(`guest: two ibverbs devices on ${DEVICE}; source GID index ${g.index} ${g.gid}; port MTU ${devs.a.queryPort(1).activeMtu}`);

/** ibverbs only: an async event the kernel itself raises. rxe raises no QP events (see KNOWN),
 *  but a completion its CQ cannot take raises IB_EVENT_CQ_ERR (rxe_cq_post: queue full): keep the
 *  JS thread from draining the CQ while 20 completions arrive for a CQ of 4 entries. */
const kernelCqErr: Case = {
  serial: true,
  title: 'a kernel CQ overflow (rxe) surfaces as an async IBV_EVENT_CQ_ERR for that CQ',
  run: async (t) => {
    const { connectPair, collect } = await import('../verbs/common.js');
    const { WrOpcode, SendFlags, AsyncEventType } = await import('../../endpoint/verbs/types.js');
    const { A, B } = connectPair(devs.a, devs.b, { cqe: 4, cqeB: 64 });
    const evs: AsyncEvent[] = [];
    const on = (e: AsyncEvent): void => { evs.push(e); };
    devs.a.on('async', on);
    for (let i = 0; i < 20; i++) B.qp.postRecv({ wrId: i, sgList: [] });
    for (let i = 0; i < 20; i++) A.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED });
    // the JS thread sleeps (no busy loop): the addon cannot drain the kernel CQ meanwhile
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);
    await collect(B.cq, 20, 10_000);
    for (let i = 0; i < 40 && !evs.some((e) => e.reason === 'IBV_EVENT_CQ_ERR'); i++) await new Promise((r) => setTimeout(r, 50));
    devs.a.off('async', on);
    t.log(`events on device a: ${evs.map((e) => e.reason).join(', ')}`);
    const kernel = evs.find((e) => e.reason === 'IBV_EVENT_CQ_ERR');
    t.truthy(kernel, 'the kernel raised IBV_EVENT_CQ_ERR (reason exactly "IBV_EVENT_CQ_ERR": from the device, not the provider\'s own overrun)');
    t.is(kernel?.type, AsyncEventType.CQ_ERR);
    t.is(kernel?.cq, A.cq, 'the event names the CQ');
    A.qp.destroy(); B.qp.destroy();
  },
};

const groups: Array<[string, Case[]]> = [
  ['conformance', conformanceCases(ibverbs, devs)],
  ['errors', errorCases(ibverbs, devs)],
  ['ibverbs', [kernelCqErr]],
];
const only = process.env.CONFORMANCE_ONLY ? new RegExp(process.env.CONFORMANCE_ONLY) : undefined;
for (const [group, cases] of groups) {
  for (const c of cases) {
    if (only && !only.test(c.title)) continue;
    const r = await runCase(c, devs);
    results.push(r);
    const head = r.outcome === 'differs' ? `differs - ${r.title}: ${r.note}` : `${r.outcome} - ${r.title}`;
    console.log(`${head} (${group}, ${(r.ms / 1000).toFixed(2)} s)`);
    for (const f of r.fails) console.log(`    ${r.outcome === 'differs' ? 'observed' : 'failed'}: ${f}`);
    for (const l of r.logs) console.log(`    log: ${l}`);
    if (r.events.length) console.log(`    async events: ${r.events.join(', ')}`);
  }
}
const why = faultsUnsupported(ibverbs);
const faults = why ? [] : faultCases(ibverbs, devs);
if (why) {
  results.push({ title: `${ibverbs.name}: fault injection`, outcome: 'skip', ms: 0, fails: [], logs: [], events: [], note: why });
  console.log(`skip - ${ibverbs.name}: fault injection (faults, 15 cases under ava on uroce): ${why}`);
}
void faults;
await devs.a.close();
await devs.b.close();
const n = (o: Result['outcome']): number => results.filter((r) => r.outcome === o).length;
writeFileSync('/out/conformance.json', JSON.stringify(results, null, 1));
console.log(`conformance on ibverbs/${DEVICE}: ${n('ok')} ok, ${n('differs')} differ (documented), ${n('skip')} skipped, ${n('not ok')} failed`);
console.log(`${n("ok")} passed, ${n("not ok")} failed`);
process.exit(n('not ok') ? 1 : 0);
