export {
  notesResultSchema,
  mcqResultSchema,
  fillResultSchema,
  studyResultSchemas,
  studyJsonSchema,
  studyLangs,
} from './schemas.js';
export type { NotesResult, McqResult, FillResult, StudyResult, StudyLang, KeyConcept, McqQuestion, FillQuestion, StudyResultByTask } from './schemas.js';
export { generateStudyTask, defaultQuestionCount, defaultConcurrency, defaultMaxParts } from './generate.js';
export type { StudyTaskInput, StudyTaskOutcome, StudyProgress } from './generate.js';
export { validateStudyAnswer, validateStudyValue, studyValidator } from './validate.js';
export type { QualityContext } from './validate.js';
export { createResultCache, studyCacheKey, studyCacheScope, sha256Hex } from './cache.js';
export type { ResultCache, ResultCacheOptions, CachedStudyResult, StudyCacheKeyParts } from './cache.js';
// The tokenizer itself (split.ts) is not exported here: importing it loads gpt-tokenizer, which only the
// token worker (token-counter.ts) does; tests and tools import src/study/split.js directly.
export { defaultPartBudgetTokens } from './token-count.js';
export type { TextPart } from './token-count.js';
export { createTokenCounter, setTokenWorkerNice, tokenCounter, tokenWorkerIdleMs } from './token-counter.js';
export type { TokenCounter, TokenCounterOptions } from './token-counter.js';
export { buildNotesRequest, buildMergeNotesRequest, buildQuestionsRequest, maxAnswerChars, taskMarker } from './prompts.js';
export { checkLanguage, detectLang, resolveLang } from './language.js';
export type { LangSource } from './language.js';
export { StudyItemExtractor, itemsOfResult } from './stream-items.js';
export type { StudyItem, StudyItemKind, ContinuationPoint } from './stream-items.js';
export type { StudyReset, StudyStreamSink } from './item-stream.js';
export { continuationPointOf, continuationRequest, mergeContinuation, continuationMarker } from './continuation.js';
