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
export { estimateTokens, estimateTokensSliced, splitText, splitTextSliced, defaultPartBudgetTokens, warmTokenizer } from './split.js';
export type { TextPart } from './split.js';
export { buildNotesRequest, buildMergeNotesRequest, buildQuestionsRequest, taskMarker } from './prompts.js';
export { checkLanguage, detectLang, resolveLang } from './language.js';
export type { LangSource } from './language.js';
