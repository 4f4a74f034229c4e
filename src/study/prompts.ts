import type { GenerationRequest, Task } from '../providers/index.js';
import { studyJsonSchema, type NotesResult, type StudyLang } from './schemas.js';

/**
 * System and user prompts for the three tasks in Korean and English. Every system prompt carries
 * one machine-readable marker line, `study-helper-task: {...}` (the emulator answers from it, and
 * it makes logs of prompts easy to grep); MCQ and fill prompts list the notes' concepts so each
 * question can name the concept it tests.
 */

interface PartPosition {
  /** 1-based. */
  readonly index: number;
  readonly total: number;
}

/** The marker line, exactly as the cross-team conventions fix it. */
function taskMarker(task: Task, lang: StudyLang, questions?: { count: number; conceptIds: readonly string[] }): string {
  const payload = questions === undefined ? { task, lang } : { task, lang, count: questions.count, conceptIds: questions.conceptIds };
  return `study-helper-task: ${JSON.stringify(payload)}`;
}

const notesShape = '{"keyConcepts":[{"id":"c1","term":"…","definition":"…","importance":"high|medium|low"}],"sections":[{"title":"…","summary":"…","bullets":["…"]}],"glossary":[{"term":"…","definition":"…"}]}';
const mcqShape = '{"questions":[{"id":"q1","question":"…","options":{"A":"…","B":"…","C":"…","D":"…"},"answer":"A|B|C|D","explanation":"…","conceptId":"c1","level":1-5,"questionType":"concept|application"}]}';
const fillShape = '{"questions":[{"id":"q1","sentence":"… ___ …","answer":"…","acceptableAnswers":["…"],"hint":"…","conceptId":"c1","level":1-5,"questionType":"concept|application"}]}';

const text = {
  en: {
    role: 'You write study material for university students from the document the user gives you.',
    jsonOnly: 'Answer with one JSON object only: no code fences, no text before or after it. Write every string value in English.',
    notes: 'Write study notes: the key concepts (ids c1, c2, … in order of appearance, importance high, medium or low), one section per topic of the document with a short summary and bullets, and a glossary of its technical terms. Use only what the document says.',
    merge: 'The user gives you study notes written separately for consecutive parts of one document. Merge them into one set of notes for the whole document: keep every distinct concept once (merge concepts that are the same idea), renumber concept ids c1, c2, … in order, keep the sections in document order, merge the glossaries without repeats.',
    mcq: (count: number) => `Write ${count} multiple-choice questions on the document. Each has exactly four options A–D with distinct texts and exactly one correct answer, an explanation of why it is correct, a level from 1 (recall) to 5 (hard application), questionType concept or application, and the conceptId of the concept it tests, taken from the concept list. No two questions may ask the same thing.`,
    fill: (count: number) => `Write ${count} fill-in-the-blank questions on the document. Each sentence comes from the document's content and contains exactly one blank written "___"; answer is the missing word or phrase (never empty), acceptableAnswers lists other correct spellings, hint helps without giving the answer away, level is 1–5, questionType concept or application, and conceptId names the concept it tests, taken from the concept list. No two questions may ask the same thing.`,
    shape: 'The JSON has this shape:',
    concepts: 'Concepts (use these ids as conceptId):',
    document: 'Document',
    partOf: (part: PartPosition) => `(part ${part.index} of ${part.total}; cover this part only)`,
    partialNotes: 'Notes of each part, in document order:',
  },
  ko: {
    role: '당신은 사용자가 준 문서로 대학생용 학습 자료를 만듭니다.',
    jsonOnly: 'JSON 객체 하나로만 답하세요. 코드 펜스나 앞뒤 설명은 쓰지 마세요. 모든 문자열 값은 한국어로 작성하세요.',
    notes: '학습 노트를 작성하세요: 핵심 개념(등장 순서대로 id c1, c2, …, importance는 high, medium, low 중 하나), 문서의 주제마다 짧은 요약과 bullet이 있는 section 하나, 그리고 전문 용어의 glossary. 문서에 있는 내용만 사용하세요.',
    merge: '사용자가 한 문서의 연속된 부분마다 따로 작성한 학습 노트를 줍니다. 이를 문서 전체의 노트 하나로 합치세요: 서로 다른 개념은 한 번씩만 남기고(같은 개념은 하나로 합침), 개념 id를 순서대로 c1, c2, …로 다시 매기고, section은 문서 순서를 지키고, glossary는 중복 없이 합치세요.',
    mcq: (count: number) => `문서에 대한 객관식 문제 ${count}개를 만드세요. 각 문제는 서로 다른 네 개의 보기 A–D와 정답 하나, 정답인 이유를 설명하는 explanation, 1(암기)부터 5(어려운 응용)까지의 level, concept 또는 application인 questionType, 그리고 개념 목록에서 고른, 그 문제가 다루는 개념의 conceptId를 가집니다. 같은 내용을 묻는 문제가 두 개 있으면 안 됩니다.`,
    fill: (count: number) => `문서에 대한 빈칸 채우기 문제 ${count}개를 만드세요. 각 sentence는 문서 내용에서 가져오고 빈칸 "___"을 정확히 하나 포함합니다. answer는 빈칸에 들어갈 단어나 구(비어 있으면 안 됨), acceptableAnswers는 다른 정답 표기, hint는 정답을 드러내지 않는 힌트, level은 1–5, questionType은 concept 또는 application, conceptId는 개념 목록에서 고른, 그 문제가 다루는 개념입니다. 같은 내용을 묻는 문제가 두 개 있으면 안 됩니다.`,
    shape: 'JSON 형식:',
    concepts: '개념 목록 (conceptId에는 이 id를 쓰세요):',
    document: '문서',
    partOf: (part: PartPosition) => `(전체 ${part.total}개 중 ${part.index}번째 부분; 이 부분만 다루세요)`,
    partialNotes: '부분별 노트 (문서 순서):',
  },
} as const;

/** Output room per task; question answers grow with the count asked for. */
export function maxOutputTokens(task: Task, count = 0): number {
  if (task === 'notes') return 4096;
  const perQuestion = task === 'mcq' ? 400 : 220;
  return Math.min(16_000, 800 + count * perQuestion);
}

/**
 * Characters one token may stand for, generously: English prose averages ~4, Korean ~1–2; 16 leaves room
 * for long runs of punctuation or whitespace a tokenizer takes as one token.
 */
const maxCharsPerToken = 16;

/**
 * The longest answer a provider can honestly give to a step of `task`: its output token
 * limit × `maxCharsPerToken` (notes 64 Ki characters; 50 MCQ questions 256 Ki). A longer answer cannot
 * be what was asked for, and is `invalid_output` before it is parsed; material is kilobytes. Every request
 * carries its own (`GenerationRequest.maxAnswerChars`): the adapter stops reading the answer past it.
 */
export function maxAnswerChars(task: Task, count = 50): number {
  return maxOutputTokens(task, count) * maxCharsPerToken;
}

function documentBlock(lang: StudyLang, body: string, part?: PartPosition): string {
  const words = text[lang];
  const heading = part === undefined || part.total <= 1 ? words.document : `${words.document} ${words.partOf(part)}`;
  return `${heading}:\n<document>\n${body}\n</document>`;
}

export interface NotesPromptInput {
  readonly text: string;
  readonly lang: StudyLang;
  readonly part?: PartPosition;
}

export function buildNotesRequest(input: NotesPromptInput): GenerationRequest {
  const words = text[input.lang];
  return {
    task: 'notes',
    lang: input.lang,
    system: [words.role, words.notes, `${words.shape} ${notesShape}`, words.jsonOnly, taskMarker('notes', input.lang)].join('\n'),
    messages: [{ role: 'user', content: documentBlock(input.lang, input.text, input.part) }],
    jsonSchema: studyJsonSchema('notes'),
    maxOutputTokens: maxOutputTokens('notes'),
    maxAnswerChars: maxAnswerChars('notes'),
  };
}

/** The reduce step of map-reduce: per-part notes in, one set of notes out. */
export function buildMergeNotesRequest(input: { readonly partials: readonly NotesResult[]; readonly lang: StudyLang }): GenerationRequest {
  const words = text[input.lang];
  const body = input.partials.map((notes, index) => `<part index="${index + 1}">\n${JSON.stringify(notes)}\n</part>`).join('\n');
  return {
    task: 'notes',
    lang: input.lang,
    system: [words.role, words.merge, `${words.shape} ${notesShape}`, words.jsonOnly, taskMarker('notes', input.lang)].join('\n'),
    messages: [{ role: 'user', content: `${words.partialNotes}\n${body}` }],
    jsonSchema: studyJsonSchema('notes'),
    maxOutputTokens: maxOutputTokens('notes'),
    maxAnswerChars: maxAnswerChars('notes'),
  };
}

/** One line per concept: what grounds the questions. */
export function conceptList(notes: NotesResult): string {
  return notes.keyConcepts.map((concept) => `- ${concept.id}: ${concept.term} — ${concept.definition}`).join('\n');
}

export interface QuestionsPromptInput {
  readonly task: 'mcq' | 'fill';
  readonly text: string;
  readonly lang: StudyLang;
  readonly count: number;
  readonly notes: NotesResult;
  readonly part?: PartPosition;
}

export function buildQuestionsRequest(input: QuestionsPromptInput): GenerationRequest {
  const words = text[input.lang];
  const conceptIds = input.notes.keyConcepts.map((concept) => concept.id);
  const instructions = input.task === 'mcq' ? words.mcq(input.count) : words.fill(input.count);
  const shape = input.task === 'mcq' ? mcqShape : fillShape;
  return {
    task: input.task,
    lang: input.lang,
    system: [words.role, instructions, `${words.shape} ${shape}`, words.jsonOnly, taskMarker(input.task, input.lang, { count: input.count, conceptIds })].join('\n'),
    messages: [{ role: 'user', content: `${words.concepts}\n${conceptList(input.notes)}\n\n${documentBlock(input.lang, input.text, input.part)}` }],
    jsonSchema: studyJsonSchema(input.task),
    maxOutputTokens: maxOutputTokens(input.task, input.count),
    maxAnswerChars: maxAnswerChars(input.task, input.count),
  };
}
