// Deterministic fault injection on an engine's transmit path (tests and debugging only).
//
// Each packet's fate is a pure function of (seed, destination QPN, PSN, opcode, AETH syndrome,
// and how many times the same key has been sent), so a run is reproducible even though
// retransmission timing varies between runs. Faults are applied after the ICRC is computed:
//   loss       the packet is not sent
//   duplicate  it is sent twice
//   reorder    it is held back and sent after the next packet (or 1 ms later)
//   corrupt    one byte of the ICRC is flipped (the receiver must drop and count it)
//   corruptPayload  one byte of the IB packet after the BTH is flipped instead

export interface FaultConfig {
  seed: number;
  /** Probabilities in [0, 1]. */
  loss?: number;
  duplicate?: number;
  reorder?: number;
  corrupt?: number;
  corruptPayload?: number;
  /** Only packets whose opcode satisfies this (default: all). */
  filter?: (opcode: number) => boolean;
}

export type FaultAction = 'pass' | 'drop' | 'duplicate' | 'reorder' | 'corrupt' | 'corruptPayload';

export interface FaultCounters { dropped: number; duplicated: number; reordered: number; corrupted: number }

/** Keys remembered for counting repeats (see decide()). */
const SEEN_MAX = 1 << 16;

function mix(h: number, v: number): number {
  h = Math.imul(h ^ v, 0x9e3779b1);
  h ^= h >>> 15;
  h = Math.imul(h, 0x85ebca77);
  h ^= h >>> 13;
  return h >>> 0;
}

export class FaultInjector {
  readonly counters: FaultCounters = { dropped: 0, duplicated: 0, reordered: 0, corrupted: 0 };
  private readonly seen = new Map<number, number>();

  constructor(readonly cfg: FaultConfig) {}

  /** Decide the fate of one packet. */
  decide(destQp: number, psn: number, opcode: number, syndrome: number): FaultAction {
    const c = this.cfg;
    if (c.filter && !c.filter(opcode)) return 'pass';
    let key = mix(mix(mix(c.seed >>> 0, destQp), psn), (opcode << 8) | syndrome);
    const nth = (this.seen.get(key) ?? 0) + 1;
    // Only recent keys matter (a retransmission follows within seconds). 1 << 20 entries were
    // ~40 MB of heap (plus rehash peaks): the 10-minute soak's "RSS growth" was mostly this
    // map filling up and being cleared (server 111 → 206 MB, non-monotonic). 64 Ki ≈ 2.5 MB.
    if (this.seen.size >= SEEN_MAX) this.seen.clear();
    this.seen.set(key, nth);
    key = mix(key, nth);
    const u = key / 4294967296;
    let acc = 0;
    if (u < (acc += c.loss ?? 0)) { this.counters.dropped++; return 'drop'; }
    if (u < (acc += c.duplicate ?? 0)) { this.counters.duplicated++; return 'duplicate'; }
    if (u < (acc += c.reorder ?? 0)) { this.counters.reordered++; return 'reorder'; }
    if (u < (acc += c.corrupt ?? 0)) { this.counters.corrupted++; return 'corrupt'; }
    if (u < (acc += c.corruptPayload ?? 0)) { this.counters.corrupted++; return 'corruptPayload'; }
    return 'pass';
  }

  /** Which byte to flip (deterministic) for a packet of n bytes: ICRC or payload. */
  static flipIndex(n: number, payload: boolean, salt: number): number {
    if (!payload || n <= 16) return n - 1 - (salt & 3);
    return 12 + (mix(salt, n) % (n - 16));
  }
}
