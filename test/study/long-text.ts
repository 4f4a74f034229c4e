/** A generated document of about `pages` pages (roughly 350 words each), in chapters and paragraphs. */
export function longDocument(pages: number, lang: 'en' | 'ko' = 'en'): string {
  const chapters: string[] = [];
  for (let page = 1; page <= pages; page += 1) {
    const paragraphs: string[] = [];
    for (let paragraph = 1; paragraph <= 5; paragraph += 1) {
      const sentences: string[] = [];
      for (let sentence = 1; sentence <= 6; sentence += 1) {
        sentences.push(
          lang === 'en'
            ? `On page ${page} the scheduler example ${paragraph}.${sentence} shows how process ${page * 10 + sentence} waits for the disk while thread ${paragraph} runs on the CPU.`
            : `${page}쪽의 예제 ${paragraph}.${sentence}에서 프로세스 ${page * 10 + sentence}는 디스크를 기다리고 스레드 ${paragraph}는 CPU에서 실행된다.`,
        );
      }
      paragraphs.push(sentences.join(' '));
    }
    const heading = lang === 'en' ? `Chapter ${page}: Scheduling topic ${page}` : `제 ${page} 장 스케줄링 주제 ${page}`;
    chapters.push(`${heading}\n\n${paragraphs.join('\n\n')}`);
  }
  return chapters.join('\n\n');
}
