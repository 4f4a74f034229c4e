/**
 * The committed encrypted-PDF fixtures are what their names say: each is encrypted, AES-256
 * (standard security handler V 5 / R 6, crypt filter AESV3) or RC4 128-bit (V 2 / R 3, no crypt filter),
 * read from the PDF's own /Encrypt dictionary. Nothing here runs qpdf.
 */
import { PDFDict, PDFDocument, PDFName, PDFNumber } from 'pdf-lib';
import { describe, expect, it } from 'vitest';
import { encryptedFixtures, encryptedPdf } from '../fixtures/pdf/generate.js';

async function encryptDictionary(bytes: Uint8Array): Promise<{ v: number; r: number; length: number; cfm: string | undefined }> {
  const doc = await PDFDocument.load(bytes, { ignoreEncryption: true, updateMetadata: false });
  expect(doc.isEncrypted).toBe(true);
  const encrypt = doc.context.lookup(doc.context.trailerInfo.Encrypt, PDFDict);
  const number = (key: string): number => encrypt.lookup(PDFName.of(key), PDFNumber).asNumber();
  const standard = encrypt.lookupMaybe(PDFName.of('CF'), PDFDict)?.lookupMaybe(PDFName.of('StdCF'), PDFDict);
  return { v: number('V'), r: number('R'), length: number('Length'), cfm: standard?.get(PDFName.of('CFM'))?.toString() };
}

describe('encrypted-PDF fixtures', () => {
  it('are four: AES-256 and RC4, each with and without a user password', () => {
    expect(encryptedFixtures.map(({ cipher, userPassword }) => `${cipher}/${userPassword}`).sort()).toEqual([
      'aes256/false',
      'aes256/true',
      'rc4/false',
      'rc4/true',
    ]);
  });

  it.each([true, false])('AES-256 (userPassword %s): V 5, R 6, 256-bit, AESV3', async (userPassword) => {
    expect(await encryptDictionary(await encryptedPdf('aes256', userPassword))).toEqual({ v: 5, r: 6, length: 256, cfm: '/AESV3' });
  });

  it.each([true, false])('RC4 (userPassword %s): V 2, R 3, 128-bit, no crypt filter', async (userPassword) => {
    expect(await encryptDictionary(await encryptedPdf('rc4', userPassword))).toEqual({ v: 2, r: 3, length: 128, cfm: undefined });
  });
});
