// A process the TCP option tests run inside their network namespace (nsenter --net=...): it
// listens and connects with plain Node sockets and, after `start`, with TCP option 254 on them
// through TcpOptionSignal. Requests and replies are JSON lines on stdin/stdout:
//   {"id":1,"op":"start","opts":{...}}            -> {"id":1,"ok":true,"info":{...}} | {"id":1,"ok":false,"code":..,"message":..}
//   {"id":2,"op":"listen","host":"::","port":0}   -> {"id":2,"ok":true,"port":N}
//   {"id":3,"op":"connect","host":..,"port":N,"write":"x","delayWriteMs":0}
//                                                  -> {"id":3,"ok":true,"conn":K,"localPort":..,"result":..,"byTuple":..}
//   {"id":4,"op":"write","conn":K,"data":"x"}     -> {"id":4,"ok":true}
//   {"id":5,"op":"accepted","port":N,"count":1}   -> {"id":5,"ok":true,"accepted":[{remotePort,result,byTuple}]}
//   {"id":6,"op":"stats"} / {"op":"close"} / {"op":"exit"}
import net from 'node:net';
import { createInterface } from 'node:readline';
import { TcpOptionSignal, TcpOptionError, type TcpOptionResult } from '../../endpoint/tcpopt/index.js';

interface Req { id: number; op: string; [k: string]: unknown }
interface Accepted { localPort: number; remoteAddress: string; remotePort: number; result: unknown; byTuple: unknown }

let sig: TcpOptionSignal | null = null;
const conns = new Map<number, net.Socket>();
let nextConn = 1;
const accepted: Accepted[] = [];
const waiters: Array<() => void> = [];
const servers: net.Server[] = [];

function out(o: unknown): void {
  process.stdout.write(JSON.stringify(o, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) + '\n');
}

async function results(s: net.Socket): Promise<{ result: TcpOptionResult | undefined | null; byTuple: TcpOptionResult | undefined | null }> {
  if (!sig) return { result: null, byTuple: null };
  const result = await sig.lookup(s);
  const byTuple = await sig.lookupTuple(s.localAddress!, s.localPort!, s.remoteAddress!, s.remotePort!);
  return { result, byTuple };
}

async function handle(r: Req): Promise<unknown> {
  switch (r.op) {
    case 'start':
      try {
        sig = await TcpOptionSignal.start((r.opts ?? {}) as object);
        return { ok: true, info: sig.info };
      } catch (e) {
        const err = e as TcpOptionError;
        return { ok: false, code: err.code, message: err.message, name: err.name };
      }
    case 'listen': {
      const srv = net.createServer((s) => {
        s.on('error', () => {});
        void results(s).then((x) => {
          accepted.push({ localPort: s.localPort!, remoteAddress: s.remoteAddress!, remotePort: s.remotePort!, ...x });
          for (const w of waiters.splice(0)) w();
        });
        s.on('data', () => {});
      });
      servers.push(srv);
      await new Promise<void>((res, rej) => { srv.once('error', rej); srv.listen({ host: r.host as string, port: r.port as number, ipv6Only: false }, res); });
      return { ok: true, port: (srv.address() as net.AddressInfo).port };
    }
    case 'connect': {
      const s = net.connect({ host: r.host as string, port: r.port as number });
      s.on('error', () => {});
      await new Promise<void>((res, rej) => { s.once('connect', res); s.once('error', rej); });
      const id = nextConn++;
      conns.set(id, s);
      const x = await results(s);
      if (typeof r.write === 'string') s.write(r.write);
      return { ok: true, conn: id, localPort: s.localPort, ...x };
    }
    case 'write': {
      const s = conns.get(r.conn as number);
      if (!s) return { ok: false, message: 'no such connection' };
      s.write(r.data as string);
      return { ok: true };
    }
    case 'accepted': {
      const want = (r.count as number | undefined) ?? 1;
      const match = (): Accepted[] => accepted.filter((a) => r.port === undefined || a.localPort === r.port);
      const deadline = Date.now() + ((r.timeoutMs as number | undefined) ?? 5000);
      while (match().length < want && Date.now() < deadline) {
        await new Promise<void>((res) => { waiters.push(res); setTimeout(res, 50); });
      }
      return { ok: true, accepted: match() };
    }
    case 'stats':
      return { ok: true, stats: sig ? await sig.stats() : null };
    case 'close':
      if (sig) await sig.close();
      sig = null;
      return { ok: true };
    case 'exit':
      for (const s of conns.values()) s.destroy();
      for (const s of servers) s.close();
      if (sig) await sig.close();
      out({ id: r.id, ok: true });
      process.exit(0);
      break;
    default:
      return { ok: false, message: `unknown op ${r.op}` };
  }
  return undefined;
}

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  let r: Req;
  try { r = JSON.parse(line) as Req; } catch { out({ ok: false, message: 'bad json' }); return; }
  handle(r).then((res) => out({ id: r.id, ...(res as object) }), (e: Error) => out({ id: r.id, ok: false, message: e.message }));
});
rl.on('close', () => { void (sig ? sig.close() : Promise.resolve()).then(() => process.exit(0)); });
out({ ready: true, pid: process.pid });
