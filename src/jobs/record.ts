import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ApiKey, ProviderId } from '../machines/types.js';
import type { JobRecord, JobResumeData, JobView } from './types.js';

/**
 * Pure helpers over a job's stored record: the view it answers, the record of an interrupted job, and
 * the salted key fingerprints a resume is checked against (docs/jobs.md "Leases and resume").
 */

/** The message of `JOB_INTERRUPTED`, the same wherever the interruption was noticed. */
const interruptedMessage =
  'The instance running this job stopped before the job ended. Its finished stages and parts are kept: ' +
  'POST /v1/jobs/:id/resume with the same key headers continues it.';

/** Queued or running: a runner must hold the job's lease, or the job is interrupted. */
export function isLiveStatus(status: JobView['status']): boolean {
  return status === 'queued' || status === 'running';
}

/** The view a client reads: the record without its resume data. */
export function publicView(record: JobRecord): JobView {
  const { resume: _resume, ...view } = record;
  return view;
}

/**
 * The record of a queued or running job whose runner is gone (its lease lapsed): `interrupted`,
 * resumable, with `JOB_INTERRUPTED` and every attempt so far; finished stages and parts are kept.
 */
export function interruptedRecord(record: JobRecord, at: number): JobRecord {
  return {
    ...record,
    status: 'interrupted',
    error: { code: 'JOB_INTERRUPTED', message: interruptedMessage, attempts: record.meta?.attempts ?? [] },
    resumable: true,
    finishedAt: at,
  };
}

/** A fresh random salt for one job's key fingerprints. */
export function newKeySalt(): string {
  return randomBytes(16).toString('hex');
}

/** HMAC-SHA256(salt, provider and key): the key itself never leaves the request. */
function keyFingerprint(salt: string, provider: ProviderId, key: ApiKey): string {
  return createHmac('sha256', salt).update(`${provider}\u0000${key.reveal()}`).digest('hex');
}

/** The fingerprints of a chain's keys under `salt`. */
export function keyFingerprints(
  salt: string,
  chain: readonly { readonly provider: ProviderId; readonly apiKey: ApiKey }[],
): Partial<Record<ProviderId, string>> {
  const fingerprints: Partial<Record<ProviderId, string>> = {};
  for (const link of chain) fingerprints[link.provider] = keyFingerprint(salt, link.provider, link.apiKey);
  return fingerprints;
}

/**
 * Whether `keys` (a resume's key headers) hold, for every provider of the job's chain, the very key the
 * job was created with (compared in constant time). A missing key is a mismatch; extra headers are ignored.
 */
export function keysMatch(resume: JobResumeData, keys: Partial<Record<ProviderId, ApiKey>>): boolean {
  if (resume.providers.length === 0) return false;
  let matches = true;
  for (const provider of resume.providers) {
    const expected = resume.keyFingerprints[provider];
    const key = keys[provider];
    if (expected === undefined || key === undefined) {
      matches = false;
      continue;
    }
    const actual = Buffer.from(keyFingerprint(resume.keySalt, provider, key), 'hex');
    const wanted = Buffer.from(expected, 'hex');
    if (actual.length !== wanted.length || !timingSafeEqual(actual, wanted)) matches = false;
  }
  return matches;
}
