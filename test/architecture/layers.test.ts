import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { folderCycles, folderEdges, machineDefinitionsOutside } from './folder-imports.js';

const src = resolve(import.meta.dirname, '../../src');

describe('the layers of src', () => {
  it('has no two folders importing each other (no cycle between folders)', () => {
    expect(folderCycles(folderEdges(src))).toEqual([]);
  });

  it('keeps src/machines the bottom layer: it imports only src/errors', () => {
    const fromMachines = [...folderEdges(src)].filter((edge) => edge.startsWith('machines>'));
    expect(fromMachines).toEqual(['machines>errors']);
  });

  it('defines every machine in src/machines: no other folder imports setup or createMachine from xstate', () => {
    expect(machineDefinitionsOutside(src)).toEqual([]);
  });

  it('sees a machine defined outside src/machines (the check can fail)', () => {
    const root = mkdtempSync(join(tmpdir(), 'machines-'));
    mkdirSync(join(root, 'machines'));
    mkdirSync(join(root, 'jobs'));
    writeFileSync(join(root, 'machines', 'a.machine.ts'), "import { assign, setup } from 'xstate';\n");
    writeFileSync(
      join(root, 'jobs', 'b.machine.ts'),
      "import {\n  createMachine as make,\n  emit,\n} from 'xstate';\n",
    );
    writeFileSync(join(root, 'jobs', 'registry.ts'), "import { createActor } from 'xstate';\n");
    expect(machineDefinitionsOutside(root)).toEqual(['jobs/b.machine.ts']);
  });

  it('keeps src/errors below everything: it imports no other folder', () => {
    expect([...folderEdges(src)].filter((edge) => edge.startsWith('errors>'))).toEqual([]);
  });

  it('sees a cycle when two folders import each other (the check can fail)', () => {
    const root = mkdtempSync(join(tmpdir(), 'layers-'));
    mkdirSync(join(root, 'a'));
    mkdirSync(join(root, 'b'));
    writeFileSync(join(root, 'a', 'x.ts'), "import type { Y } from '../b/y.js';\nexport type X = Y;\n");
    writeFileSync(join(root, 'b', 'y.ts'), "export type { X as Y } from '../a/x.js';\n");
    expect(folderCycles(folderEdges(root))).toEqual(['a⇄b']);
  });
});
