export { notesResultSchema, mcqResultSchema, fillResultSchema, studyJsonSchema } from './schemas.js';
export type { NotesResult, McqResult, FillResult, StudyLang, McqQuestion } from './schemas.js';
export { generateStudyTask, defaultQuestionCount } from './generate.js';
export type { StudyTaskOutcome, StudyProgress } from './generate.js';
export { validateStudyAnswer, validateStudyValue, studyValidator } from './validate.js';
export { createResultCache, studyCacheKey, studyCacheScope } from './cache.js';
export type { ResultCache } from './cache.js';
// The tokenizer itself (split.ts) is not exported here: importing it loads gpt-tokenizer, which only the
// token worker (token-counter.ts) does; tests and tools import src/study/split.js directly.
export { createCostBudget } from './cost-budget.js';
export { estimateJob } from './estimate.js';
export { TooManyPartsError } from './parts-limit.js';
export { createTokenCounter, setTokenWorkerNice } from './token-counter.js';
export type { TokenCounter } from './token-counter.js';
export { buildNotesRequest, buildMergeNotesRequest, buildQuestionsRequest, maxAnswerChars } from './prompts.js';
export { resolveLang } from './language.js';
export type { LangSource } from './language.js';
export type { StudyItem } from './stream-items.js';
export type { StudyReset } from './item-stream.js';
export { continuationRequest } from './continuation.js';
