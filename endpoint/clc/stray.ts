// After a fallback that we decided (a CLC timeout, a malformed message), the peer may already
// have sent CLC messages it wrote before our Decline reached it: its Proposal or Confirm, or its
// own Decline when it timed out too. They are in the TCP stream in front of the application's
// data. Handing them to the application would corrupt its stream, so they are taken off here:
// only whole CLC messages (eyecatcher, length in range, eyecatcher trailer) at the very start of
// the stream, at most MAX_STRAY of them; the first byte that cannot begin one ends the check and
// everything from there on passes unchanged. Application data that itself starts with a
// complete CLC message would be taken too; SMC peers never send such data on a fallback.

import { couldStartClc, CLC_EYECATCHER_LEN } from '../../dissectors/wire/clc.js';
import { frameClc, hasClcTrailer } from './channel.js';

const MAX_STRAY = 4;

export class StrayClcFilter {
  private held: Buffer = Buffer.alloc(0);
  private passing = false;
  /** CLC messages taken off the stream so far. */
  dropped = 0;

  /** Feed received bytes; returns the bytes the application may have now (maybe empty). */
  feed(b: Buffer): Buffer {
    if (this.passing) return b;
    this.held = this.held.length === 0 ? b : Buffer.concat([this.held, b]);
    for (;;) {
      // A short start that cannot become an eyecatcher is data at once (an app's "hi" waits for nothing).
      const n = this.held.length;
      if (n > 0 && n < CLC_EYECATCHER_LEN && !couldStartClc(this.held)) return this.flush();
      const f = frameClc(this.held);
      if (f.kind === 'partial') {
        // Fewer than 4 bytes that could still be an eyecatcher, or a CLC message not complete yet.
        return Buffer.alloc(0);
      }
      if (f.kind === 'bad' || !hasClcTrailer(this.held, f.length) || this.dropped >= MAX_STRAY) return this.flush();
      this.held = this.held.subarray(f.length);
      this.dropped++;
      if (this.held.length === 0) return this.held;
    }
  }

  /** Stop checking (end of stream, or the check took too long): everything held is data. */
  flush(): Buffer {
    this.passing = true;
    const b = this.held;
    this.held = Buffer.alloc(0);
    return b;
  }

  get checking(): boolean { return !this.passing; }

  /** Bytes held back now (the start of what may be a CLC message). */
  get holding(): number { return this.held.length; }
}
