/**
 * Token-set similarity that works for Korean as well as English. The original service tokenized
 * with `\b[a-zA-Z]{4,}\b`, so every Korean question had an empty token set and the near-duplicate
 * check never fired. Here letters and digits of any script count (`\p{L}\p{N}`); Hangul words lose
 * one trailing particle (은/는/이/가/을/를/의/에서/으로/…) and become character bigrams, so two
 * questions that differ only in particles get the same set.
 */

/** Longest first, so 에서 is stripped before 서 could be considered. */
const hangulParticles = [
  '에서는', '에게서', '으로는', '으로서', '으로써', '이라는', '에서', '에게', '으로', '까지', '부터', '처럼', '보다',
  '라는', '이라', '와는', '과는', '은', '는', '이', '가', '을', '를', '의', '에', '로', '와', '과', '도', '만',
] as const;

const segmentPattern = /(\p{Script=Hangul}+)|((?:(?!\p{Script=Hangul})[\p{L}\p{N}])+)/gu;
const runPattern = /[\p{L}\p{N}]+/gu;

function stripParticle(word: string): string {
  for (const particle of hangulParticles) {
    if (word.length > particle.length && word.endsWith(particle)) return word.slice(0, -particle.length);
  }
  return word;
}

function bigrams(word: string): string[] {
  if (word.length < 2) return [word];
  const grams: string[] = [];
  for (let index = 0; index + 2 <= word.length; index += 1) grams.push(word.slice(index, index + 2));
  return grams;
}

/** The set of comparison tokens of a question's text. */
export function similarityTokens(text: string): Set<string> {
  const tokens = new Set<string>();
  const normalized = text.normalize('NFKC').toLocaleLowerCase();
  for (const run of normalized.match(runPattern) ?? []) {
    let segmentIndex = 0;
    for (const segment of run.matchAll(segmentPattern)) {
      const [, hangul, other] = segment;
      if (other !== undefined) tokens.add(other);
      else if (hangul !== undefined) {
        // A particle glued to a Latin word or a number ("LRU는", "3개를") carries no meaning here.
        const isBareParticle = segmentIndex > 0 && (hangulParticles as readonly string[]).includes(hangul);
        if (!isBareParticle) for (const gram of bigrams(stripParticle(hangul))) tokens.add(gram);
      }
      segmentIndex += 1;
    }
  }
  return tokens;
}

/** |A ∩ B| / |A ∪ B|; two empty sets are identical. */
export function jaccard(left: ReadonlySet<string>, right: ReadonlySet<string>): number {
  if (left.size === 0 && right.size === 0) return 1;
  let shared = 0;
  for (const token of left) if (right.has(token)) shared += 1;
  return shared / (left.size + right.size - shared);
}

/** Default similarity at or above which two questions are the same question. */
export const nearDuplicateThreshold = 0.8;

export function textSimilarity(left: string, right: string): number {
  return jaccard(similarityTokens(left), similarityTokens(right));
}
