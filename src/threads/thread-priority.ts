/**
 * Lowers the CPU priority of the calling thread alone (Linux: a thread's id is a pid for setpriority(2);
 * `/proc/thread-self` names it). A worker doing a stranger's heavy work (pdf.js on an upload, token counting
 * of a long text) then takes only the CPU the event loop leaves, instead of an equal share of the cores.
 * Elsewhere (no /proc) it does nothing and says so.
 */
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/**
 * WORKER_NICE's default: the lowest priority. The workers do a stranger's batch work; the event loop answers
 * everyone's requests. An idle core still goes to a worker whole: the value only matters when they compete.
 */
export const defaultWorkerNice = 19;

/** Sets this thread's nice value (0 unchanged … 19 lowest); true when it was applied. */
export function lowerThreadPriority(nice: number): boolean {
  if (nice <= 0) return false;
  try {
    const threadId = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(threadId) || threadId <= 0) return false;
    setPriority(threadId, Math.min(19, nice));
    return true;
  } catch {
    return false;
  }
}
