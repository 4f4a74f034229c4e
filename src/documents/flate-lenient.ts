/**
 * FlateDecode as pdf.js decodes it (its FlateStream, src/core/flate_stream.js), for the stream scan to
 * count. zlib refuses a stream with a back-reference "too far back" (before the first byte) before
 * emitting anything, but pdf.js copies from before its buffer (an undefined read, stored as 0) and goes
 * on, so a bomb built on such references passed a zlib-based count while pdf.js decoded it whole. pdf.js
 * tries the platform's strict inflate (DecompressionStream) first and falls back to this decoder when
 * that fails, so what this yields is what pdf.js holds at most. It also ignores the Adler-32 checksum
 * and keeps what a block decoded before a corrupt code (pdf.js has allocated it by then).
 *
 * Output is yielded in chunks of at most `chunkBytes`; only the 32 KiB window a back-reference can
 * reach is kept, in a ring.
 */

const codeLenCodeMap = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
const lengthDecode = [
  0x00003, 0x00004, 0x00005, 0x00006, 0x00007, 0x00008, 0x00009, 0x0000a, 0x1000b, 0x1000d, 0x1000f, 0x10011, 0x20013, 0x20017,
  0x2001b, 0x2001f, 0x30023, 0x3002b, 0x30033, 0x3003b, 0x40043, 0x40053, 0x40063, 0x40073, 0x50083, 0x500a3, 0x500c3, 0x500e3,
  0x00102, 0x00102, 0x00102,
];
const distDecode = [
  0x00001, 0x00002, 0x00003, 0x00004, 0x10005, 0x10007, 0x20009, 0x2000d, 0x30011, 0x30019, 0x40021, 0x40031, 0x50041, 0x50061,
  0x60081, 0x600c1, 0x70101, 0x70181, 0x80201, 0x80301, 0x90401, 0x90601, 0xa0801, 0xa0c01, 0xb1001, 0xb1801, 0xc2001, 0xc3001,
  0xd4001, 0xd6001,
];

type HuffmanTable = [codes: Int32Array, maxLen: number];

/** pdf.js's generateHuffmanTable: codes indexed by their bit-reversed value, each `length << 16 | symbol`. */
function huffmanTable(lengths: Uint8Array): HuffmanTable {
  let maxLen = 0;
  for (const length of lengths) maxLen = Math.max(maxLen, length);
  const size = 1 << maxLen;
  const codes = new Int32Array(size);
  for (let len = 1, code = 0, skip = 2; len <= maxLen; len += 1, code <<= 1, skip <<= 1) {
    for (let value = 0; value < lengths.length; value += 1) {
      if (lengths[value] !== len) continue;
      let reversed = 0;
      let t = code;
      for (let bit = 0; bit < len; bit += 1) {
        reversed = (reversed << 1) | (t & 1);
        t >>= 1;
      }
      for (let index = reversed; index < size; index += skip) codes[index] = (len << 16) | value;
      code += 1;
    }
  }
  return [codes, maxLen];
}

const fixedLiteralTable = huffmanTable(
  Uint8Array.from({ length: 288 }, (_, symbol) => (symbol < 144 ? 8 : symbol < 256 ? 9 : symbol < 280 ? 7 : 8)),
);
const fixedDistanceTable = huffmanTable(new Uint8Array(32).fill(5));

/** pdf.js's FormatError: the stream ends there. */
class CorruptFlate extends Error {}

/** Reads bits least significant first, as pdf.js's getBits and getCode do. */
class BitReader {
  at = 0;
  private codeBuf = 0;
  private codeSize = 0;

  constructor(private readonly data: Uint8Array) {}

  byte(): number {
    return this.at < this.data.length ? (this.data[this.at++] ?? 0) : -1;
  }

  peek(): number {
    return this.at < this.data.length ? (this.data[this.at] ?? 0) : -1;
  }

  bits(count: number): number {
    while (this.codeSize < count) {
      const next = this.byte();
      if (next === -1) throw new CorruptFlate('Bad encoding in flate stream');
      this.codeBuf |= next << this.codeSize;
      this.codeSize += 8;
    }
    const value = this.codeBuf & ((1 << count) - 1);
    this.codeBuf >>= count;
    this.codeSize -= count;
    return value;
  }

  code([codes, maxLen]: HuffmanTable): number {
    while (this.codeSize < maxLen) {
      const next = this.byte();
      if (next === -1) break;
      this.codeBuf |= next << this.codeSize;
      this.codeSize += 8;
    }
    const code = codes[this.codeBuf & ((1 << maxLen) - 1)] ?? 0;
    const length = code >> 16;
    if (length < 1 || this.codeSize < length) throw new CorruptFlate('Bad encoding in flate stream');
    this.codeBuf >>= length;
    this.codeSize -= length;
    return code & 0xffff;
  }

  alignToByte(): void {
    this.codeBuf = 0;
    this.codeSize = 0;
  }
}

/** Window kept for back-references (32 KiB) plus a chunk not yet yielded, rounded up to a power of two. */
const ringBytes = 1 << 17;
const ringMask = ringBytes - 1;

/**
 * The bytes pdf.js's FlateStream would decode from `data`, in chunks of at most `chunkBytes`. A
 * header pdf.js refuses yields nothing.
 */
export function* inflateAsPdfJs(data: Uint8Array, chunkBytes: number): Generator<Uint8Array> {
  const input = new BitReader(data);
  const cmf = input.byte();
  const flg = input.byte();
  if (cmf === -1 || flg === -1 || (cmf & 0x0f) !== 0x08 || ((cmf << 8) + flg) % 31 !== 0 || (flg & 0x20) !== 0) return;
  const ring = new Uint8Array(ringBytes);
  let pos = 0;
  let emitted = 0;
  const take = (): Uint8Array => {
    const chunk = new Uint8Array(pos - emitted);
    for (let index = 0; index < chunk.length; index += 1) chunk[index] = ring[(emitted + index) & ringMask] ?? 0;
    emitted = pos;
    return chunk;
  };
  let eof = false;
  try {
    while (!eof) {
      let header: number;
      try {
        header = input.bits(3);
      } catch {
        break;
      }
      if (header & 1) eof = true;
      header >>= 1;
      if (header === 0) {
        const b0 = input.byte();
        const b1 = input.byte();
        const b2 = input.byte();
        const b3 = input.byte();
        if (b0 === -1 || b1 === -1 || b2 === -1 || b3 === -1) break;
        const blockLength = b0 | (b1 << 8);
        const check = b2 | (b3 << 8);
        if (check !== (~blockLength & 0xffff) && (blockLength !== 0 || check !== 0)) break;
        input.alignToByte();
        if (blockLength === 0) {
          if (input.peek() === -1) eof = true;
          continue;
        }
        for (let index = 0; index < blockLength; index += 1) {
          const next = input.byte();
          if (next === -1) {
            eof = true;
            break;
          }
          ring[pos & ringMask] = next;
          pos += 1;
          if (pos - emitted >= chunkBytes) yield take();
        }
        continue;
      }
      let literals: HuffmanTable;
      let distances: HuffmanTable;
      if (header === 1) {
        literals = fixedLiteralTable;
        distances = fixedDistanceTable;
      } else if (header === 2) {
        [literals, distances] = dynamicTables(input);
      } else break;
      for (;;) {
        let code = input.code(literals);
        if (code < 256) {
          ring[pos & ringMask] = code;
          pos += 1;
          if (pos - emitted >= chunkBytes) yield take();
          continue;
        }
        if (code === 256) break;
        code = lengthDecode[code - 257] ?? 0;
        const lengthExtra = code >> 16;
        const length = (code & 0xffff) + (lengthExtra > 0 ? input.bits(lengthExtra) : 0);
        code = distDecode[input.code(distances)] ?? 0;
        const distanceExtra = code >> 16;
        const distance = (code & 0xffff) + (distanceExtra > 0 ? input.bits(distanceExtra) : 0);
        for (let index = 0; index < length; index += 1) {
          // Before the first byte (or no distance): pdf.js reads undefined and stores 0.
          ring[pos & ringMask] = distance > 0 && pos - distance >= 0 ? (ring[(pos - distance) & ringMask] ?? 0) : 0;
          pos += 1;
        }
        if (pos - emitted >= chunkBytes) yield take();
      }
    }
  } catch (error) {
    if (!(error instanceof CorruptFlate)) throw error;
  }
  if (pos > emitted) yield take();
}

/** The literal/length and distance tables of a dynamic block (pdf.js's reading, repeat codes included). */
function dynamicTables(input: BitReader): [HuffmanTable, HuffmanTable] {
  const literalCount = input.bits(5) + 257;
  const distanceCount = input.bits(5) + 1;
  const codeLengthCount = input.bits(4) + 4;
  const codeLengthLengths = new Uint8Array(codeLenCodeMap.length);
  for (let index = 0; index < codeLengthCount; index += 1) codeLengthLengths[codeLenCodeMap[index] ?? 0] = input.bits(3);
  const codeLengthTable = huffmanTable(codeLengthLengths);
  const total = literalCount + distanceCount;
  const lengths = new Uint8Array(total);
  let length = 0;
  let index = 0;
  while (index < total) {
    const code = input.code(codeLengthTable);
    let repeat: number;
    let what: number;
    if (code === 16) {
      repeat = input.bits(2) + 3;
      what = length;
    } else if (code === 17) {
      repeat = input.bits(3) + 3;
      what = length = 0;
    } else if (code === 18) {
      repeat = input.bits(7) + 11;
      what = length = 0;
    } else {
      lengths[index] = length = code;
      index += 1;
      continue;
    }
    // pdf.js writes past the end of its typed array here (ignored); so does this.
    for (; repeat > 0; repeat -= 1, index += 1) if (index < total) lengths[index] = what;
  }
  return [huffmanTable(lengths.subarray(0, literalCount)), huffmanTable(lengths.subarray(literalCount, total))];
}
