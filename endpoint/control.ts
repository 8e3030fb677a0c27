// The endpoint's local control socket: a Unix domain socket (never TCP) in an owner-only
// directory, speaking line-delimited JSON:
//
//   {"cmd":"state"}                  → one line: the endpoint's state (stateJson())
//   {"cmd":"watch","intervalMs":N}   → one state line now and every N ms until the client closes
//   anything else                    → one line {"error":"…"} (the connection stays usable)
//
// Path: $XDG_RUNTIME_DIR/smcscope/<pid>.sock, else /run/smcscope/<pid>.sock (directory 0700,
// socket 0600: only the owner — and root — can connect). A hostile or broken client never
// hurts the endpoint: request lines are limited to 64 KiB, clients to 32, a client that does
// not read its answers is paused and then dropped, and every error stays on its connection.
//
// Clients (smcdump --endpoint): queryControl() and watchControl().

import { createServer, createConnection, type Server, type Socket } from 'node:net';
import { chmodSync, lstatSync, mkdirSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { SmcStack } from './stack.js';
import { jsonReplacer } from '../dissectors/wire/common.js';

export const MAX_REQUEST_BYTES = 64 * 1024;
export const MAX_CLIENTS = 32;
/** Unsent answer bytes per client before it is paused (and at 4× dropped). */
const MAX_BACKLOG = 4 * 1024 * 1024;
export const MIN_WATCH_MS = 20;
export const MAX_WATCH_MS = 3_600_000;

/** The endpoint's state as plain JSON (bigints as hex strings), with when and by whom it was taken. */
export function stateJson(stack: SmcStack): Record<string, unknown> {
  const snap = JSON.parse(JSON.stringify(stack.snapshot(), jsonReplacer)) as Record<string, unknown>;
  return { ...snap, takenAt: new Date().toISOString(), pid: process.pid };
}

/** Default socket path for this process. */
export function defaultControlPath(pid = process.pid): string {
  const base = process.env.XDG_RUNTIME_DIR && process.env.XDG_RUNTIME_DIR.startsWith('/') ? process.env.XDG_RUNTIME_DIR : '/run';
  return join(base, 'smcscope', `${pid}.sock`);
}

export interface ControlServer {
  readonly path: string;
  /** Connected clients now. */
  readonly clients: number;
  /** Stop listening, end every client, remove the socket file. */
  close(): Promise<void>;
}

/**
 * The directory of the control socket. Created (0700) when missing; an existing one
 * is used as it is and never changed (with --control /tmp/x.sock a chmod would lock every other
 * user out of /tmp): it must be a real directory, ours or root's, and not writable by others
 * unless sticky (like /tmp). The socket itself is owner-only whatever the directory's mode.
 */
function controlDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 }); // what it creates is 0700; what exists stays as it is
  } catch (e) {
    throw new Error(`control socket: cannot create ${dir}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { cause: e });
  }
  const st = lstatSync(dir);
  if (!st.isDirectory()) throw new Error(`control socket: ${dir} is not a directory`);
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid && st.uid !== 0) throw new Error(`control socket: ${dir} belongs to uid ${st.uid}, not to us (${uid}) or root: refusing to use it`);
  if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) throw new Error(`control socket: ${dir} is writable by others and not sticky: refusing to use it`);
}

/** Is a Unix socket at `path` alive (someone accepts)? */
function alive(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection(path);
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

/**
 * Serve the stack's state on a local control socket (default path: defaultControlPath()).
 * Resolves once listening; rejects with one clear message (path in use, directory not ours …).
 */
export async function serveControl(stack: SmcStack, path: string = defaultControlPath()): Promise<ControlServer> {
  controlDir(dirname(path));
  try {
    const st = lstatSync(path);
    if (!st.isSocket()) throw new Error(`control socket: ${path} exists and is not a socket`);
    if (await alive(path)) throw new Error(`control socket: ${path} is in use by another process`);
    unlinkSync(path); // stale socket of a process that is gone
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const sockets = new Set<Socket>();
  const server: Server = createServer((sock) => {
    if (sockets.size >= MAX_CLIENTS) {
      sock.end(JSON.stringify({ error: `too many clients (at most ${MAX_CLIENTS})` }) + '\n');
      sock.on('error', () => undefined);
      return;
    }
    sockets.add(sock);
    serveClient(stack, sock, () => sockets.delete(sock));
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    const onErr = (e: Error): void => reject(new Error(`control socket: cannot listen on ${path}: ${(e as NodeJS.ErrnoException).code ?? e.message}`));
    server.once('error', onErr);
    // Created owner-only (umask), not just chmod-ed after: nobody may connect in between.
    const mask = process.umask(0o177);
    try {
      server.listen(path, () => { server.off('error', onErr); resolve(); });
    } finally {
      process.umask(mask);
    }
  });
  chmodSync(path, 0o600);
  server.unref();
  const cleanup = (): void => { try { unlinkSync(path); } catch { /* gone */ } };
  process.once('exit', cleanup);
  let closed = false;
  return {
    path,
    get clients() { return sockets.size; },
    close: async () => {
      if (closed) return;
      closed = true;
      process.off('exit', cleanup);
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      cleanup();
    },
  };
}

function serveClient(stack: SmcStack, sock: Socket, gone: () => void): void {
  let timer: NodeJS.Timeout | undefined;
  let ended = false;
  const end = (): void => {
    if (ended) return;
    ended = true;
    if (timer) clearInterval(timer);
    gone();
  };
  sock.on('error', () => { end(); sock.destroy(); });
  sock.on('close', end);
  const send = (o: unknown): void => {
    if (ended || sock.destroyed) return;
    if (sock.writableLength > 4 * MAX_BACKLOG) { sock.destroy(); return; } // never reads: drop it
    let line: string;
    try {
      line = JSON.stringify(o, jsonReplacer) + '\n';
    } catch (e) {
      line = JSON.stringify({ error: `internal error: ${(e as Error).message}` }) + '\n';
    }
    if (!sock.write(line) && sock.writableLength > MAX_BACKLOG) {
      // stop reading requests until it reads its answers
      sock.pause();
      sock.once('drain', () => { if (!ended) sock.resume(); });
    }
  };
  const snapshot = (): unknown => {
    try { return stateJson(stack); } catch (e) { return { error: `state unavailable: ${(e as Error).message}` }; }
  };
  const handle = (line: string): void => {
    const text = line.trim();
    if (text === '') return;
    let req: unknown;
    try { req = JSON.parse(text); } catch { send({ error: 'bad request: not JSON (send one JSON object per line, e.g. {"cmd":"state"})' }); return; }
    if (typeof req !== 'object' || req === null || Array.isArray(req)) { send({ error: 'bad request: expected a JSON object with "cmd"' }); return; }
    const r = req as Record<string, unknown>;
    if (r.cmd === 'state') { send(snapshot()); return; }
    if (r.cmd === 'watch') {
      const ms = r.intervalMs ?? 1000;
      if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < MIN_WATCH_MS || ms > MAX_WATCH_MS) {
        send({ error: `bad request: intervalMs must be an integer from ${MIN_WATCH_MS} to ${MAX_WATCH_MS}` });
        return;
      }
      if (timer) clearInterval(timer);
      send(snapshot());
      timer = setInterval(() => {
        // a slow reader gets fewer snapshots, never a growing queue
        if (sock.writableLength > MAX_BACKLOG) return;
        send(snapshot());
      }, ms);
      timer.unref();
      return;
    }
    send({ error: `bad request: unknown cmd ${JSON.stringify(typeof r.cmd === 'string' ? r.cmd.slice(0, 40) : r.cmd ?? null)} (use "state" or "watch")` });
  };
  onLines(sock, MAX_REQUEST_BYTES, handle, () => {
    send({ error: `bad request: line longer than ${MAX_REQUEST_BYTES} bytes` });
    sock.end();
    end();
  });
}

/**
 * Split a socket's text into lines for `onLine`; a line (or an unterminated rest) longer than
 * `max` calls `onTooLong` and stops. Both sides of the control socket read this way.
 */
function onLines(sock: Socket, max: number, onLine: (line: string) => void, onTooLong: () => void): void {
  let buf = '';
  let stopped = false;
  sock.setEncoding('utf8');
  sock.on('data', (chunk: string) => {
    if (stopped) return;
    buf += chunk;
    for (let nl = buf.indexOf('\n'); nl >= 0 && !stopped; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.length > max) { stopped = true; onTooLong(); return; }
      onLine(line);
    }
    if (buf.length > max) { stopped = true; buf = ''; onTooLong(); }
  });
  sock.once('close', () => { stopped = true; });
}

// ---------------------------------------------------------------------------------------------
// Client side
// ---------------------------------------------------------------------------------------------

function connectError(path: string, e: NodeJS.ErrnoException): Error {
  const why = e.code === 'ENOENT' ? 'no such socket (is the endpoint running? smcping/smcperf print their control socket path)'
    : e.code === 'EACCES' ? 'permission denied (the socket is owner-only: run as the endpoint\'s user)'
    : e.code === 'ECONNREFUSED' ? 'nobody listens (the endpoint is gone)' : e.code ?? e.message;
  return new Error(`control socket ${path}: ${why}`);
}

/** Reads JSON lines from a control socket; each parsed line goes to `onLine`. */
function lineReader(sock: Socket, onLine: (v: unknown) => void, onBad: (e: Error) => void): void {
  let bad = false;
  onLines(sock, 256 * 1024 * 1024, (line) => {
    if (bad) return;
    let v: unknown;
    try { v = JSON.parse(line); } catch { bad = true; onBad(new Error('control socket: the answer is not JSON')); return; }
    onLine(v);
  }, () => onBad(new Error('control socket: answer line too long')));
}

/** One request, one answer (e.g. {"cmd":"state"}). Rejects with a one-line message. */
export function queryControl(path: string, req: object = { cmd: 'state' }, timeoutMs = 5000): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const sock = createConnection(path);
    const timer = setTimeout(() => { sock.destroy(); reject(new Error(`control socket ${path}: no answer within ${timeoutMs} ms`)); }, timeoutMs);
    let done = false;
    const finish = (f: () => void): void => { if (done) return; done = true; clearTimeout(timer); sock.destroy(); f(); };
    sock.once('error', (e) => finish(() => reject(connectError(path, e))));
    sock.once('connect', () => sock.write(JSON.stringify(req) + '\n'));
    sock.once('close', () => finish(() => reject(new Error(`control socket ${path}: closed without an answer`))));
    lineReader(sock, (v) => finish(() => resolve(v)), (e) => finish(() => reject(e)));
  });
}

export interface ControlWatch {
  close(): void;
}

/** Subscribe to snapshots every `intervalMs`; `onState` gets each parsed line (or an error once). */
export function watchControl(path: string, intervalMs: number, onState: (v: unknown) => void, onError: (e: Error) => void): ControlWatch {
  const sock = createConnection(path);
  let closed = false;
  sock.once('error', (e) => { if (!closed) onError(connectError(path, e)); });
  sock.once('connect', () => sock.write(JSON.stringify({ cmd: 'watch', intervalMs }) + '\n'));
  lineReader(sock, (v) => { if (!closed) onState(v); }, (e) => { if (!closed) { closed = true; sock.destroy(); onError(e); } });
  sock.unref();
  return { close: () => { closed = true; sock.destroy(); } };
}
