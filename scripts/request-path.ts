/**
 * The diagram of a `POST /v1/generate`'s whole path (HTTP → study → gateway → fallback run → provider →
 * breaker → upstream call → adapter → SDK → transport → provider API), embedded in docs/architecture.md
 * between `<!-- request-path -->` markers by `npm run docs:machines` and checked by
 * test/core/machine-docs.test.ts.
 *
 * Nothing in it is a hard-coded path: each stage names the export that defines it, and its file is found
 * by reading src (a machine's node also lists the files outside src/machines that run it, i.e. import it
 * as a value). Each arrow names what backs it, and rendering fails when that is not true of the code:
 * an import (a chain of at most three relative imports, type imports included), a message (the event's
 * name quoted in both nodes' files), an interface (both sides import the file that declares it), or a
 * package (imported by the node's files or one import away).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const sourceRoot = join(projectRoot, 'src');

/** A node of the diagram: a module found by its export, or a package, or something outside the service. */
type Stage =
  | { readonly id: string; readonly label: string; readonly exportName: string }
  | { readonly id: string; readonly label: string; readonly packageName: string }
  | { readonly id: string; readonly label: string; readonly outside: true };

/** What backs an arrow. */
type Backing =
  | { readonly kind: 'import' }
  | { readonly kind: 'message'; readonly event: string }
  | { readonly kind: 'interface'; readonly name: string }
  | { readonly kind: 'package' }
  | { readonly kind: 'route'; readonly path: string }
  | { readonly kind: 'outside' };

interface Arrow {
  readonly from: string;
  readonly to: string;
  readonly label: string;
  readonly backing: Backing;
  /** Check the backing from these stages' files instead of \`from\`'s (an SDK calls what its adapter gave it). */
  readonly checkFrom?: string;
}

/** The stages a `POST /v1/generate` crosses, in order. */
const requestStages: readonly Stage[] = [
  { id: 'client', label: 'client', outside: true },
  { id: 'route', label: 'HTTP route', exportName: 'generateRoutes' },
  { id: 'study', label: 'study task', exportName: 'generateStudyTask' },
  { id: 'gateway', label: 'gateway facade', exportName: 'createGateway' },
  { id: 'fallback', label: 'retry-and-fallback run', exportName: 'fallbackMachine' },
  { id: 'provider', label: 'provider actor', exportName: 'providerMachine' },
  { id: 'attempt', label: "a call's attempt", exportName: 'attemptMachine' },
  { id: 'breaker', label: 'circuit breaker', exportName: 'breakerMachine' },
  { id: 'claude', label: 'Claude adapter', exportName: 'createClaudeAdapter' },
  { id: 'gpt', label: 'GPT adapter', exportName: 'createGptAdapter' },
  { id: 'timelygpt', label: 'TimelyGPT adapter', exportName: 'createTimelyGptAdapter' },
  { id: 'anthropicSdk', label: 'Anthropic SDK', packageName: '@anthropic-ai/sdk' },
  { id: 'openaiSdk', label: 'OpenAI SDK', packageName: 'openai' },
  { id: 'transport', label: 'upstream transport', exportName: 'upstreamFetch' },
  { id: 'undici', label: 'undici pool', packageName: 'undici' },
  { id: 'api', label: 'provider API (or the emulator)', outside: true },
];

/** The arrows between the stages, each with what backs it in the code. */
const requestArrows: readonly Arrow[] = [
  { from: 'client', to: 'route', label: 'POST /v1/generate', backing: { kind: 'route', path: '/v1/generate' } },
  { from: 'route', to: 'study', label: 'generateStudyTask()', backing: { kind: 'import' } },
  { from: 'study', to: 'gateway', label: 'gateway.generate() per part', backing: { kind: 'interface', name: 'Gateway' } },
  { from: 'gateway', to: 'fallback', label: 'a run per request', backing: { kind: 'import' } },
  { from: 'fallback', to: 'provider', label: 'call.requested', backing: { kind: 'message', event: 'call.requested' } },
  { from: 'provider', to: 'attempt', label: 'one per call', backing: { kind: 'message', event: 'attempt.ended' } },
  { from: 'attempt', to: 'breaker', label: 'breaker.admit', backing: { kind: 'message', event: 'breaker.admit' } },
  { from: 'attempt', to: 'claude', label: 'adapter.generate()', backing: { kind: 'interface', name: 'ProviderAdapter' } },
  { from: 'attempt', to: 'gpt', label: 'adapter.generate()', backing: { kind: 'interface', name: 'ProviderAdapter' } },
  { from: 'attempt', to: 'timelygpt', label: 'adapter.generate()', backing: { kind: 'interface', name: 'ProviderAdapter' } },
  { from: 'claude', to: 'anthropicSdk', label: 'messages.create', backing: { kind: 'package' } },
  { from: 'gpt', to: 'openaiSdk', label: 'chat.completions.create', backing: { kind: 'package' } },
  { from: 'anthropicSdk', to: 'transport', label: 'its fetch option', backing: { kind: 'import' }, checkFrom: 'claude' },
  { from: 'openaiSdk', to: 'transport', label: 'its fetch option', backing: { kind: 'import' }, checkFrom: 'gpt' },
  { from: 'timelygpt', to: 'transport', label: 'its own wire', backing: { kind: 'import' } },
  { from: 'transport', to: 'undici', label: 'request()', backing: { kind: 'package' } },
  { from: 'undici', to: 'api', label: 'HTTPS', backing: { kind: 'outside' } },
];

/** Every .ts file under src, relative to the project root. */
function sourceFiles(dir = sourceRoot): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [relative(projectRoot, path)] : [];
  });
}

/** Module specifiers a file imports or re-exports, statically or with `import()`, and whether as a value. */
function specifiers(text: string): Array<{ specifier: string; value: boolean }> {
  const found: Array<{ specifier: string; value: boolean }> = [];
  for (const match of text.matchAll(/(import|export)(\s+type)?\s[^'";]*?from\s+['"]([^'"]+)['"]/g))
    found.push({ specifier: match[3] ?? '', value: match[2] === undefined });
  for (const match of text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push({ specifier: match[1] ?? '', value: true });
  return found;
}

/** The source file a relative specifier of `file` names, if it exists. */
function resolveRelative(file: string, specifier: string, known: ReadonlySet<string>): string | undefined {
  const base = relative(projectRoot, resolve(projectRoot, dirname(file), specifier)).replace(/\.js$/, '');
  return [`${base}.ts`, `${base}/index.ts`].find((candidate) => known.has(candidate));
}

/** The source as the diagram reads it: each file's text, relative imports and packages. */
export interface SourceIndex {
  readonly text: ReadonlyMap<string, string>;
  readonly imports: ReadonlyMap<string, ReadonlySet<string>>;
  readonly packages: ReadonlyMap<string, ReadonlySet<string>>;
}

export function indexSource(): SourceIndex {
  const files = sourceFiles();
  const known = new Set(files);
  const text = new Map<string, string>();
  const imports = new Map<string, Set<string>>();
  const packages = new Map<string, Set<string>>();
  for (const file of files) {
    const content = readFileSync(join(projectRoot, file), 'utf8');
    text.set(file, content);
    const local = new Set<string>();
    const external = new Set<string>();
    for (const { specifier } of specifiers(content)) {
      if (specifier.startsWith('.')) {
        const target = resolveRelative(file, specifier, known);
        if (target !== undefined) local.add(target);
      } else if (!specifier.startsWith('node:')) {
        external.add(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : (specifier.split('/')[0] ?? specifier));
      }
    }
    imports.set(file, local);
    packages.set(file, external);
  }
  return { text, imports, packages };
}

/** The one file that declares `export … name`. */
function declaringFile(source: SourceIndex, name: string): string {
  const declaration = new RegExp(`export\\s+(?:declare\\s+)?(?:async\\s+)?(?:function\\*?|const|let|class|interface|type)\\s+${name}\\b`);
  const files = [...source.text].filter(([, content]) => declaration.test(content)).map(([file]) => file);
  if (files.length !== 1) throw new Error(`request path: expected one file declaring ${name}, found ${files.length} (${files.join(', ')})`);
  return files[0] as string;
}

/** Files outside src/machines that import `name` from `file` as a value: the runtime that runs a machine. */
function runners(source: SourceIndex, file: string, name: string): string[] {
  return [...source.text]
    .filter(([other, content]) => {
      if (other.startsWith('src/machines/') || !source.imports.get(other)?.has(file)) return false;
      return specifiers(content).some(({ value }) => value) && new RegExp(`import\\s*\\{[^}]*\\b${name}\\b[^}]*\\}\\s*from`).test(content);
    })
    .map(([other]) => other)
    .sort();
}

/** Whether `to` is reachable from `from` in at most `depth` relative imports. */
function reaches(source: SourceIndex, from: string, to: string, depth = 3): boolean {
  let frontier = new Set([from]);
  for (let step = 0; step < depth; step += 1) {
    const next = new Set<string>();
    for (const file of frontier) for (const target of source.imports.get(file) ?? []) next.add(target);
    if (next.has(to)) return true;
    frontier = next;
  }
  return false;
}

interface Node {
  readonly stage: Stage;
  /** The defining file first, then its runners. */
  readonly files: readonly string[];
}

function resolveNodes(source: SourceIndex): Map<string, Node> {
  const nodes = new Map<string, Node>();
  for (const stage of requestStages) {
    if (!('exportName' in stage)) {
      nodes.set(stage.id, { stage, files: [] });
      continue;
    }
    const file = declaringFile(source, stage.exportName);
    const run = file.startsWith('src/machines/') ? runners(source, file, stage.exportName) : [];
    nodes.set(stage.id, { stage, files: [file, ...run] });
  }
  return nodes;
}

/** Why `arrow` is not true of the code, or undefined when it is. */
function arrowProblem(source: SourceIndex, nodes: ReadonlyMap<string, Node>, arrow: Arrow): string | undefined {
  const from = nodes.get(arrow.checkFrom ?? arrow.from);
  const to = nodes.get(arrow.to);
  if (from === undefined || to === undefined) return `unknown stage in ${arrow.from} → ${arrow.to}`;
  const { backing } = arrow;
  const named = `${arrow.from} → ${arrow.to}`;
  const mentions = (files: readonly string[], word: string): boolean =>
    files.some((file) => new RegExp(`['"\`]${word.replace(/\./g, '\\.')}['"\`]`).test(source.text.get(file) ?? ''));
  switch (backing.kind) {
    case 'import':
      return from.files.some((a) => to.files.some((b) => reaches(source, a, b))) ? undefined : `${named}: no import chain`;
    case 'message':
      return mentions(from.files, backing.event) && mentions(to.files, backing.event) ? undefined : `${named}: ${backing.event} is not named on both sides`;
    case 'interface': {
      const declared = declaringFile(source, backing.name);
      const uses = (files: readonly string[]): boolean => files.some((file) => file === declared || reaches(source, file, declared, 2));
      return uses(from.files) && uses(to.files) ? undefined : `${named}: both sides must import ${backing.name} (${declared})`;
    }
    case 'package': {
      if (!('packageName' in to.stage)) return `${named}: not a package`;
      const pkg = to.stage.packageName;
      const near = from.files.flatMap((file) => [file, ...(source.imports.get(file) ?? [])]);
      return near.some((file) => source.packages.get(file)?.has(pkg)) ? undefined : `${named}: ${pkg} is not imported`;
    }
    case 'route':
      return mentions(to.files, backing.path) ? undefined : `${named}: ${to.files[0] ?? '?'} registers no ${backing.path}`;
    case 'outside':
      return undefined;
  }
}

function nodeText(node: Node): string {
  const { stage } = node;
  if ('packageName' in stage) return `${stage.label}<br/><code>${stage.packageName}</code>`;
  if (!('exportName' in stage)) return stage.label;
  const [file, ...run] = node.files;
  return `${stage.label}<br/><code>${file ?? ''}</code>${run.map((runner) => `<br/>run by <code>${runner}</code>`).join('')}`;
}

/** The Mermaid flowchart of the request's path; throws when a stage or an arrow is not true of the code. */
export function renderRequestPath(source: SourceIndex = indexSource()): string {
  const nodes = resolveNodes(source);
  const problems = requestArrows.map((arrow) => arrowProblem(source, nodes, arrow)).filter((problem) => problem !== undefined);
  if (problems.length > 0) throw new Error(`request path diagram is not true of src:\n${problems.join('\n')}`);
  const lines = ['flowchart TD'];
  for (const node of nodes.values()) {
    const shape = 'exportName' in node.stage ? ['["', '"]'] : ['(["', '"])'];
    lines.push(`  ${node.stage.id}${shape[0]}${nodeText(node)}${shape[1]}`);
  }
  for (const arrow of requestArrows) {
    const style = arrow.backing.kind === 'message' ? '-.->' : '-->';
    lines.push(`  ${arrow.from} ${style}${arrow.label === '' ? '' : `|"${arrow.label}"|`} ${arrow.to}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Rewrites the `<!-- request-path -->` block of `text` (if any) with the current diagram. */
export function embedRequestPath(text: string, diagram: string = renderRequestPath()): string {
  return text.replace(
    /<!-- request-path -->[\s\S]*?<!-- \/request-path -->/,
    () =>
      `<!-- request-path -->\n<!-- generated by npm run docs:machines (scripts/request-path.ts) from src's exports and imports -->\n\`\`\`mermaid\n${diagram}\`\`\`\n<!-- /request-path -->`,
  );
}
