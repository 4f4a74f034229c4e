export type { DocumentStore, ExtractedPdf, StoredDocument } from './types.js';
export { createMemoryDocumentStore, type MemoryDocumentStoreOptions } from './memory-store.js';
export { createPdfExtractor, pdfExtractorDefaults, type PdfExtractor, type PdfExtractorOptions } from './pdf-extractor.js';
export type { WorkerMemory } from './worker-protocol.js';
export { defaultMaxDecodedBytes, defaultMaxTotalPages, type ExtractOptions } from './extract-text.js';
export { DocumentStoreUnavailableError, PdfExtractorBusyError, PdfRejectedError, pdfLimits, type PdfLimit, type PdfRejectionCode } from './errors.js';
export { looksLikePdf } from './detect.js';
export { addressShareKey } from './fair-queue.js';
export { countCharacters, countWords } from './text-stats.js';
