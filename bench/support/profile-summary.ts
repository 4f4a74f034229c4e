/**
 * `node --import tsx bench/support/profile-summary.ts <file.cpuprofile> [top]`: where a --cpu-prof
 * profile's time goes, as self time per function and per package / source file (what docs/benchmarks.md quotes).
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** `node_modules/<package>` or the path under the repository, or `(native)`. */
export function ownerOf(url: string): string {
  if (url === '') return '(native / GC / idle)';
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1] as string;
  const repo = /\/(src|bench)\/(.+)$/.exec(url);
  if (repo) return `${repo[1]}/${repo[2]}`;
  return url.startsWith('node:') ? 'node: internals' : url;
}

export function summarize(profile: Profile, top = 25): string {
  const self = new Map<number, number>();
  profile.samples.forEach((id, index) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0)));
  const total = [...self.values()].reduce((sum, value) => sum + value, 0);
  const byFunction = new Map<string, number>();
  const byOwner = new Map<string, number>();
  const attributed = new Map<string, number>();
  const parent = new Map<number, ProfileNode>();
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node);
  /** Node internals and native frames are charged to the nearest caller in a package or source file. */
  const caller = (node: ProfileNode): string => {
    let current: ProfileNode | undefined = node;
    while (current !== undefined) {
      const owner = ownerOf(current.callFrame.url);
      if (owner !== 'node: internals' && owner !== '(native / GC / idle)') return owner;
      current = parent.get(current.id);
    }
    return ownerOf(node.callFrame.url);
  };
  for (const node of profile.nodes) {
    const time = self.get(node.id) ?? 0;
    if (time === 0) continue;
    const frame = node.callFrame;
    const owner = ownerOf(frame.url);
    const name = `${frame.functionName || '(anonymous)'} ${owner}:${frame.lineNumber + 1}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + time);
    byOwner.set(owner, (byOwner.get(owner) ?? 0) + time);
    if (frame.functionName !== '(idle)') {
      const charged = caller(nodes.get(node.id) ?? node);
      attributed.set(charged, (attributed.get(charged) ?? 0) + time);
    }
  }
  const lines = (map: Map<string, number>): string =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, time]) => `${((100 * time) / total).toFixed(1).padStart(5)}%  ${name}`)
      .join('\n');
  return (
    `total ${(total / 1e6).toFixed(1)} s sampled\n\nby package / file:\n${lines(byOwner)}\n\n` +
    `busy time, node internals and native work charged to their nearest package / file caller:\n${lines(attributed)}\n\n` +
    `by function (self):\n${lines(byFunction)}\n`
  );
}

if (process.argv[1]?.endsWith('profile-summary.ts')) {
  const file = process.argv[2];
  if (file === undefined) throw new Error('usage: profile-summary.ts <file.cpuprofile> [top]');
  process.stdout.write(summarize(JSON.parse(readFileSync(file, 'utf8')) as Profile, Number(process.argv[3] ?? 25)));
}
