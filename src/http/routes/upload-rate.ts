/**
 * How fast upload bodies are read, all uploads of the process together. Every byte of an upload passes
 * through the event loop as a chunk that becomes garbage: 30 uploads of 19.5 MB from one address pushed
 * 585 MB through it in 8 s, and the collections of that garbage (27 full ones in the window instead of 2)
 * delayed every other client by 430 ms at p99. Reading no faster than this rate spreads the same bytes
 * over more time; a paused read is back-pressure on the sockets, so nothing is held meanwhile.
 */
export class ByteRate {
  private available: number;
  private last: number;
  private tail: Promise<void> = Promise.resolve();

  /** @param bytesPerSecond what may be read each second; a burst of one second's worth is allowed at once */
  constructor(
    private readonly bytesPerSecond: number,
    private readonly now: () => number = () => Date.now(),
  ) {
    this.available = bytesPerSecond;
    this.last = now();
  }

  /** Resolves once `bytes` may be read; callers are served in turn. */
  take(bytes: number): Promise<void> {
    const turn = this.tail.then(() => this.wait(bytes));
    this.tail = turn;
    return turn;
  }

  private async wait(bytes: number): Promise<void> {
    this.refill();
    this.available -= bytes;
    if (this.available >= 0) return;
    const waitMs = Math.ceil((-this.available / this.bytesPerSecond) * 1000);
    await new Promise((resolve) => setTimeout(resolve, waitMs));
    this.refill();
  }

  private refill(): void {
    const now = this.now();
    this.available = Math.min(this.bytesPerSecond, this.available + ((now - this.last) / 1000) * this.bytesPerSecond);
    this.last = now;
  }
}

/** Upload bytes read per second by one process, all uploads together: a 20 MB upload alone takes under a second. */
export const uploadBytesPerSecond = 24 * 1024 * 1024;
