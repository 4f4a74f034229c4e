/**
 * The streams of an encrypted PDF as pdf.js reads them, for the stream scan (stream-scan.ts): a PDF
 * that opens without a password (an empty user password, owner restrictions only) is decrypted by
 * pdf.js with a key anyone can derive, so its streams are as readable, and as able to hold a
 * decompression bomb, as a plain file's. This follows pdf.js's CipherTransformFactory (the standard
 * security handler): RC4 (V 1, 2), crypt filters V2 / AESV2 (V 4), AESV3 (V 5, R 5 and R 6), the
 * object key from its number and generation. A PDF the empty password does not open is not decrypted
 * here: pdf.js asks for a password and decodes none of its streams (ENCRYPTED_PDF).
 */
import { createDecipheriv, createCipheriv, createHash } from 'node:crypto';
import { nameOf, stringOf, type PdfDict, type PdfValue } from './pdf-syntax.js';

/** Decrypts one stream's data, given the object it belongs to. */
export type StreamDecryptor = (data: Uint8Array, num: number, gen: number) => Uint8Array;

const passwordPadding = Uint8Array.from([
  0x28, 0xbf, 0x4e, 0x5e, 0x4e, 0x75, 0x8a, 0x41, 0x64, 0x00, 0x4e, 0x56, 0xff, 0xfa, 0x01, 0x08, 0x2e, 0x2e, 0x00, 0xb6, 0xd0, 0x68,
  0x3e, 0x80, 0x2f, 0x0c, 0xa9, 0xfe, 0x64, 0x53, 0x69, 0x7a,
]);

type Resolve = (value: PdfValue) => PdfValue;

/**
 * The decryptor of a PDF's streams with the empty user password, or undefined when there is nothing to
 * decrypt (crypt filter Identity or None) or the empty password does not open it.
 */
export function emptyPasswordDecryptor(encrypt: PdfDict, fileId: Uint8Array, resolve: Resolve): StreamDecryptor | undefined {
  if (nameOf(resolve(encrypt.get('Filter'))) !== 'Standard') return undefined;
  const algorithm = resolve(encrypt.get('V'));
  if (algorithm !== 1 && algorithm !== 2 && algorithm !== 4 && algorithm !== 5) return undefined;
  const revision = resolve(encrypt.get('R'));
  const owner = stringOf(resolve(encrypt.get('O'))) ?? new Uint8Array(0);
  const user = stringOf(resolve(encrypt.get('U'))) ?? new Uint8Array(0);
  const cryptFilters = resolve(encrypt.get('CF'));
  const streamFilter = algorithm >= 4 ? (nameOf(resolve(encrypt.get('StmF'))) ?? 'Identity') : undefined;
  const method = streamFilter === undefined ? 'V2' : cryptMethod(cryptFilters, streamFilter, resolve);
  if (method === undefined) return undefined;
  let key: Uint8Array | undefined;
  if (algorithm === 5) {
    key = revision === 5 || revision === 6 ? aes256Key(revision, user, stringOf(resolve(encrypt.get('UE'))) ?? new Uint8Array(0)) : undefined;
  } else {
    const keyLength = keyLengthBits(encrypt, algorithm, cryptFilters, streamFilter, resolve);
    const flags = resolve(encrypt.get('P'));
    const encryptMetadata = algorithm === 4 && resolve(encrypt.get('EncryptMetadata')) !== false;
    if (keyLength === undefined || typeof flags !== 'number' || typeof revision !== 'number') return undefined;
    key = rc4Key(fileId, owner.subarray(0, 32), user.subarray(0, 32), flags, revision, keyLength, encryptMetadata);
    if (key !== undefined && algorithm === 4 && key.length < 16) key = Uint8Array.from([...key, ...new Uint8Array(16 - key.length)]);
  }
  if (key === undefined) return undefined;
  const fileKey = key;
  switch (method) {
    case 'V2':
      return (data, num, gen) => rc4(objectKey(fileKey, num, gen, false), data);
    case 'AESV2':
      return (data, num, gen) => aesCbc('aes-128-cbc', objectKey(fileKey, num, gen, true), data);
    case 'AESV3':
      return (data) => aesCbc('aes-256-cbc', fileKey, data);
    default:
      return undefined;
  }
}

/** The CFM of the named crypt filter: undefined for Identity and None (pdf.js's NullCipher). */
function cryptMethod(cryptFilters: PdfValue, name: string, resolve: Resolve): string | undefined {
  if (!(cryptFilters instanceof Map)) return undefined;
  const filter = resolve(cryptFilters.get(name));
  const method = filter instanceof Map ? nameOf(resolve(filter.get('CFM'))) : undefined;
  return method === 'None' ? undefined : method;
}

function keyLengthBits(encrypt: PdfDict, algorithm: number, cryptFilters: PdfValue, streamFilter: string | undefined, resolve: Resolve): number | undefined {
  let length = resolve(encrypt.get('Length'));
  if (typeof length !== 'number' || length === 0) {
    if (algorithm <= 3) length = 40;
    else {
      const handler = cryptFilters instanceof Map && streamFilter !== undefined ? resolve(cryptFilters.get(streamFilter)) : undefined;
      const handlerLength = handler instanceof Map ? resolve(handler.get('Length')) : undefined;
      length = typeof handlerLength === 'number' && handlerLength !== 0 ? handlerLength : 128;
      if (length < 40) length <<= 3;
    }
  }
  return Number.isInteger(length) && length >= 40 && length % 8 === 0 ? length : undefined;
}

const md5 = (data: Uint8Array): Uint8Array => new Uint8Array(createHash('md5').update(data).digest());

/** pdf.js #prepareKeyData with no password: the file key, or undefined when /U says the empty password is wrong. */
function rc4Key(fileId: Uint8Array, owner: Uint8Array, user: Uint8Array, flags: number, revision: number, keyLength: number, encryptMetadata: boolean): Uint8Array | undefined {
  const flagBytes = Uint8Array.from([flags & 0xff, (flags >> 8) & 0xff, (flags >> 16) & 0xff, (flags >>> 24) & 0xff]);
  const tail = revision >= 4 && !encryptMetadata ? Uint8Array.from([0xff, 0xff, 0xff, 0xff]) : new Uint8Array(0);
  let hash = md5(Buffer.concat([passwordPadding, owner, flagBytes, fileId, tail]));
  const keyBytes = keyLength >> 3;
  if (revision >= 3) for (let round = 0; round < 50; round += 1) hash = md5(hash.subarray(0, keyBytes));
  const key = hash.subarray(0, keyBytes);
  let check: Uint8Array;
  if (revision >= 3) {
    check = rc4(key, md5(Buffer.concat([passwordPadding, fileId])));
    for (let round = 1; round <= 19; round += 1) check = rc4(key.map((byte) => byte ^ round), check);
  } else check = rc4(key, passwordPadding);
  return check.every((byte, index) => user[index] === byte) ? key : undefined;
}

/** R 5 (SHA-256) and R 6 (ISO 32000-2's hash) with the empty password: the file key from /UE, or undefined. */
function aes256Key(revision: 5 | 6, user: Uint8Array, userEncryption: Uint8Array): Uint8Array | undefined {
  const hash = revision === 6 ? pdf20Hash : (input: Uint8Array): Uint8Array => new Uint8Array(createHash('sha256').update(input).digest());
  const validation = hash(user.subarray(32, 40));
  if (!validation.every((byte, index) => user[index] === byte) || user.length < 48) return undefined;
  const intermediate = hash(user.subarray(40, 48));
  if (userEncryption.length < 32) return undefined;
  const decipher = createDecipheriv('aes-256-cbc', intermediate, new Uint8Array(16)).setAutoPadding(false);
  return new Uint8Array(Buffer.concat([decipher.update(userEncryption.subarray(0, 32)), decipher.final()]));
}

/** pdf.js PDF20._hash for the empty password and no user bytes (ISO 32000-2 algorithm 2.B). */
function pdf20Hash(input: Uint8Array): Uint8Array {
  let k = new Uint8Array(createHash('sha256').update(input).digest());
  let e = new Uint8Array(1);
  for (let round = 0; round < 64 || (e.at(-1) ?? 0) > round - 32; round += 1) {
    // The whole of the last hash (32, 48 or 64 bytes), as pdf.js repeats it.
    const block = k;
    const repeated = Buffer.concat(Array.from({ length: 64 }, () => block));
    const cipher = createCipheriv('aes-128-cbc', k.subarray(0, 16), k.subarray(16, 32)).setAutoPadding(false);
    e = new Uint8Array(Buffer.concat([cipher.update(repeated), cipher.final()]));
    let sum = 0;
    for (const byte of e.subarray(0, 16)) sum += byte;
    const algorithm = ['sha256', 'sha384', 'sha512'][sum % 3] ?? 'sha256';
    k = new Uint8Array(createHash(algorithm).update(e).digest());
  }
  return k.subarray(0, 32);
}

/** pdf.js #buildObjectKey. */
function objectKey(key: Uint8Array, num: number, gen: number, aes: boolean): Uint8Array {
  const suffix = [num & 0xff, (num >> 8) & 0xff, (num >> 16) & 0xff, gen & 0xff, (gen >> 8) & 0xff, ...(aes ? [0x73, 0x41, 0x6c, 0x54] : [])];
  return md5(Uint8Array.from([...key, ...suffix])).subarray(0, Math.min(key.length + 5, 16));
}

/** RC4 (pdf.js ARCFourCipher); OpenSSL 3 no longer offers it by default. */
function rc4(key: Uint8Array, data: Uint8Array): Uint8Array {
  const state = Uint8Array.from({ length: 256 }, (_, index) => index);
  for (let i = 0, j = 0; i < 256; i += 1) {
    j = (j + (state[i] ?? 0) + (key[i % key.length] ?? 0)) & 0xff;
    [state[i], state[j]] = [state[j] ?? 0, state[i] ?? 0];
  }
  const out = new Uint8Array(data.length);
  for (let index = 0, i = 0, j = 0; index < data.length; index += 1) {
    i = (i + 1) & 0xff;
    j = (j + (state[i] ?? 0)) & 0xff;
    [state[i], state[j]] = [state[j] ?? 0, state[i] ?? 0];
    out[index] = (data[index] ?? 0) ^ (state[((state[i] ?? 0) + (state[j] ?? 0)) & 0xff] ?? 0);
  }
  return out;
}

/** AES-CBC as pdf.js decrypts a stream: the first 16 bytes are the IV, a partial last block is dropped, valid padding removed. */
function aesCbc(algorithm: 'aes-128-cbc' | 'aes-256-cbc', key: Uint8Array, data: Uint8Array): Uint8Array {
  if (data.length < 32) return new Uint8Array(0);
  const body = data.subarray(16, 16 + Math.floor((data.length - 16) / 16) * 16);
  const decipher = createDecipheriv(algorithm, key, data.subarray(0, 16)).setAutoPadding(false);
  const plain = Buffer.concat([decipher.update(body), decipher.final()]);
  const pad = plain[plain.length - 1] ?? 0;
  const padded = pad >= 1 && pad <= 16 && plain.subarray(plain.length - pad).every((byte) => byte === pad);
  return new Uint8Array(padded ? plain.subarray(0, plain.length - pad) : plain);
}
