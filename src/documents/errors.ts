/** Why a PDF was refused; the codes are those of the HTTP registry (src/http/errors.ts). */
export type PdfRejectionCode = 'INVALID_PDF' | 'ENCRYPTED_PDF' | 'NO_EXTRACTABLE_TEXT';

/** A PDF the service cannot use: corrupt, locked by a password, or without a text layer. */
export class PdfRejectedError extends Error {
  readonly code: PdfRejectionCode;

  constructor(code: PdfRejectionCode, message: string) {
    super(message);
    this.name = 'PdfRejectedError';
    this.code = code;
  }
}

export function isPdfRejectionCode(value: unknown): value is PdfRejectionCode {
  return value === 'INVALID_PDF' || value === 'ENCRYPTED_PDF' || value === 'NO_EXTRACTABLE_TEXT';
}
