/** A local check of docs/study-material.md shapes (the study module owns the real zod schemas). */
const letters = ['A', 'B', 'C', 'D'];

function isText(value: unknown): value is string {
  return typeof value === 'string' && value.trim().length > 0;
}

export function notesProblems(value: unknown): string[] {
  const problems: string[] = [];
  const notes = value as { keyConcepts?: unknown; sections?: unknown; glossary?: unknown };
  if (!Array.isArray(notes.keyConcepts) || notes.keyConcepts.length === 0) return ['keyConcepts missing'];
  for (const concept of notes.keyConcepts as Record<string, unknown>[]) {
    if (!isText(concept['id']) || !isText(concept['term']) || !isText(concept['definition'])) problems.push('concept fields');
    if (!['high', 'medium', 'low'].includes(String(concept['importance']))) problems.push('importance');
  }
  if (!Array.isArray(notes.sections) || notes.sections.length === 0) problems.push('sections missing');
  for (const section of (notes.sections ?? []) as Record<string, unknown>[]) {
    if (!isText(section['title']) || !isText(section['summary']) || !Array.isArray(section['bullets'])) problems.push('section fields');
  }
  if (!Array.isArray(notes.glossary)) problems.push('glossary missing');
  return problems;
}

export function questionsProblems(value: unknown, kind: 'mcq' | 'fill', count: number, conceptIds: readonly string[]): string[] {
  const problems: string[] = [];
  const questions = (value as { questions?: unknown }).questions;
  if (!Array.isArray(questions)) return ['questions missing'];
  if (questions.length !== count) problems.push(`expected ${count} questions, got ${questions.length}`);
  const texts = new Set<string>();
  for (const question of questions as Record<string, unknown>[]) {
    if (!isText(question['id'])) problems.push('id');
    if (!conceptIds.includes(String(question['conceptId']))) problems.push(`conceptId ${String(question['conceptId'])}`);
    const level = question['level'];
    if (typeof level !== 'number' || level < 1 || level > 5) problems.push('level');
    if (!['concept', 'application'].includes(String(question['questionType']))) problems.push('questionType');
    if (kind === 'mcq') {
      const options = question['options'] as Record<string, unknown> | undefined;
      const values = letters.map((letter) => options?.[letter]);
      if (!values.every(isText) || new Set(values).size !== 4) problems.push('options not 4 distinct');
      if (!letters.includes(String(question['answer']))) problems.push('answer letter');
      if (!isText(question['question']) || !isText(question['explanation'])) problems.push('question text');
      texts.add(String(question['question']));
    } else {
      const sentence = String(question['sentence']);
      if (sentence.split('___').length !== 2) problems.push('not exactly one ___');
      if (!isText(question['answer']) || !Array.isArray(question['acceptableAnswers']) || !isText(question['hint'])) problems.push('fill fields');
      texts.add(sentence);
    }
  }
  if (texts.size !== questions.length) problems.push('duplicate questions');
  return problems;
}
