/**
 * Distinctive keys through every error path (auth, rate limit, quota, permission, timeout, invalid output,
 * an upstream that echoes the key in its error message, bad input, unknown document, admin errors):
 * no key, and no 10-character piece of one, may appear in any response body or header, any log line, or
 * /metrics.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postJson, request, startHarness, studyText } from './blackbox-support.js';
import type { Harness, HttpResult } from './blackbox-support.js';

let harness: Harness;
const seen: string[] = [];

beforeAll(async () => {
  harness = await startHarness();
});

afterAll(async () => {
  await harness.close();
});

/** Keys long enough to hold many 10-character pieces, each one unlike anything else in the service. */
const leakKeys = {
  plain: { claude: 'lk-claude-Qv7Rm2Xp9Tz4Wb6Nc8Hd', gpt: 'sk-proj-Lw3Kf8Ys1Gq5Jm0Vu2Ea7Rt', timelygpt: 'tg-Zx4Pn9Bc2Mv6Ld1Hs3Kq8Wy' },
  bad: { claude: 'emu-bad-Hq2Zr8Vn4Kw7Pc1Xm5Td', gpt: 'emu-bad-Yb6Lf3Gs9Jd2Rk7Nq4Wc', timelygpt: 'emu-bad-Mt8Vx1Ch5Pz3Bn6Kr9Lg' },
  ratelimit: { claude: 'emu-ratelimit-Fw4Jq7Ns2Xv', gpt: 'emu-ratelimit-Dk9Rm3Tb6Hy', timelygpt: 'emu-ratelimit-Gc5Lp8Wz1Qn' },
  quota: { claude: 'emu-quota-Vr2Ht6Mk9Bx4Ps', gpt: 'emu-quota-Nj7Qc1Wf5Ly3Zd', timelygpt: 'emu-quota-Kb8Xs4Gv2Rm6Tp' },
  forbidden: { claude: 'emu-forbidden-Ps3Wn7Jc1Hq', gpt: 'emu-forbidden-Tz6Lb9Fx4Km', timelygpt: 'emu-forbidden-Rc2Vg5Nd8Yw' },
  /** Refused with a 401 that echoes them: quarantined afterwards, so the plain keys stay healthy. */
  echoed: { claude: 'lk-claude-Jd5Wq8Ft2Lx6Rb9Mg', gpt: 'sk-proj-Hy4Vc7Kn2Tb9Qs5Ze1Wp', timelygpt: 'tg-Rb7Mx2Ld9Vq4Pk6Wf1Jc' },
} as const;
type KeySet = (typeof leakKeys)[keyof typeof leakKeys];

const everyKey = Object.values(leakKeys).flatMap((set) => Object.values(set));

function headersOf(set: KeySet): Record<string, string> {
  return { 'x-claude-key': set.claude, 'x-gpt-key': set.gpt, 'x-timelygpt-key': set.timelygpt };
}

function record(result: HttpResult): HttpResult {
  seen.push(result.text);
  result.headers.forEach((value, name) => seen.push(`${name}: ${value}`));
  return result;
}

/** Every 10-character piece of every key (the prefixes the emulator reads are shared, so pieces start past them). */
function pieces(key: string): string[] {
  const out: string[] = [];
  for (let start = 0; start + 10 <= key.length; start += 1) out.push(key.slice(start, start + 10));
  return out;
}

const sharedPrefixes = ['emu-bad-', 'emu-ratelimit-', 'emu-quota-', 'emu-forbidden-'];

function findLeaks(texts: readonly string[]): string[] {
  const leaks: string[] = [];
  for (const key of everyKey) {
    const prefix = sharedPrefixes.find((p) => key.startsWith(p)) ?? '';
    // A piece inside the emulator's public prefix ("emu-ratelimit-") is not secret; every other piece is.
    for (const piece of pieces(key).filter((p) => !prefix.includes(p))) {
      for (const text of texts) if (text.includes(piece)) leaks.push(`${piece} in ${text.slice(0, 200)}`);
    }
  }
  return leaks;
}

function generate(body: unknown, headers: Record<string, string>): Promise<HttpResult> {
  return postJson(`${harness.url}/v1/generate`, body, headers).then(record);
}

describe('keys never leak', () => {
  it('through every error path', async () => {
    const body = { task: 'notes', text: studyText };
    expect((await generate(body, headersOf(leakKeys.bad))).status).toBe(401);
    expect((await generate(body, headersOf(leakKeys.ratelimit))).status).toBe(429);
    expect((await generate(body, headersOf(leakKeys.quota))).status).toBe(402);
    expect((await generate(body, headersOf(leakKeys.forbidden))).status).toBe(403);
    // Again: the quarantined keys are skipped without an upstream call (key_quarantined), same answer.
    expect((await generate(body, headersOf(leakKeys.bad))).status).toBe(401);

    // The upstream echoes the whole key in its error message, as OpenAI's "Incorrect API key provided" does.
    for (const provider of ['claude', 'gpt', 'timelygpt'] as const) {
      const key = leakKeys.echoed[provider];
      harness.fault({
        provider,
        fault: 'respond',
        status: 401,
        body:
          provider === 'gpt'
            ? { error: { message: `Incorrect API key provided: ${key}. You can find your API key at https://platform.openai.com.`, type: 'invalid_request_error', param: null, code: 'invalid_api_key' } }
            : provider === 'claude'
              ? { type: 'error', error: { type: 'authentication_error', message: `invalid x-api-key ${key}` }, request_id: 'req_leak' }
              : { success: false, error: 'Unauthorized', message: `Invalid key ${key}`, statusCode: 401 },
      });
    }
    expect((await generate(body, headersOf(leakKeys.echoed))).status).toBe(401);
    harness.emulator.resetFaults();

    for (const provider of ['claude', 'gpt', 'timelygpt'] as const) harness.fault({ provider, fault: 'hang', count: 1 });
    record(await generate(body, headersOf(leakKeys.plain)));
    harness.emulator.resetFaults();
    await harness.reset();

    for (const provider of ['claude', 'gpt', 'timelygpt'] as const) harness.fault({ provider, fault: 'invalidOutput' });
    expect((await generate(body, headersOf(leakKeys.plain))).status).toBe(502);
    harness.emulator.resetFaults();

    // A 200 whose answer echoes the caller's key: raw, percent-encoded, spaced, and a 9-character
    // piece. The answer reaches the client scrubbed.
    const echoed = leakKeys.plain.gpt;
    const notes = {
      keyConcepts: [
        { id: 'c1', term: 'Photosynthesis', definition: `Light becomes chemical energy; your key is ${echoed}.`, importance: 'high' },
        { id: 'c2', term: 'Chlorophyll', definition: `Absorbs blue and red light (${encodeURIComponent(echoed)}).`, importance: 'medium' },
        { id: 'c3', term: 'Glucose', definition: `Stores the energy: ${[...echoed].join(' ')} and ${echoed.slice(9, 18)}.`, importance: 'low' },
      ],
      sections: [{ title: 'Photosynthesis in plants', summary: 'Plants turn light into chemical energy stored in glucose.', bullets: ['Chlorophyll absorbs light.'] }],
      glossary: [{ term: 'ATP', definition: 'The energy currency of the cell.' }],
    };
    harness.fault({
      provider: 'gpt',
      fault: 'respond',
      status: 200,
      body: {
        id: 'chatcmpl-echo',
        object: 'chat.completion',
        created: 1,
        model: 'gpt-test',
        choices: [{ index: 0, message: { role: 'assistant', content: JSON.stringify(notes) }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
      },
    });
    const answered = await generate({ task: 'notes', text: studyText, providers: ['gpt'] }, headersOf(leakKeys.plain));
    expect(answered.status, answered.text).toBe(200);
    expect(answered.text).toContain('[redacted]');
    expect(answered.text).not.toContain(echoed.slice(9, 18));
    expect(answered.text).not.toContain(encodeURIComponent(echoed).slice(0, 12));
    expect(answered.text).not.toContain([...echoed.slice(8, 16)].join(' '));
    harness.emulator.resetFaults();

    // Bad input and refusals of the service itself, keys in the headers all along.
    expect((await generate({ task: 'essay', text: 'x' }, headersOf(leakKeys.plain))).status).toBe(400);
    expect((await generate({ task: 'notes', documentId: 'nope' }, headersOf(leakKeys.plain))).status).toBe(404);
    expect((await generate({ task: 'notes', text: 'x', providers: ['gpt'] }, { 'x-claude-key': leakKeys.plain.claude })).status).toBe(400);
    record(
      await request(`${harness.url}/v1/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headersOf(leakKeys.plain) },
        body: `{"task":"notes","text":"${leakKeys.plain.gpt}`,
      }),
    );
    record(
      await postJson(`${harness.url}/v1/providers/claude/breaker`, { action: 'reset' }, { authorization: `Bearer ${leakKeys.plain.claude}`, ...headersOf(leakKeys.plain) }),
    );
    record(await request(`${harness.url}/v1/nowhere`, { headers: headersOf(leakKeys.plain) }));

    // A success too: keys must not ride along in meta.
    expect((await generate(body, headersOf(leakKeys.plain))).status).toBe(200);

    record(await request(`${harness.url}/metrics`));
    record(await request(`${harness.url}/v1/providers`));

    expect(harness.logs.length).toBeGreaterThan(10);
    expect(findLeaks(seen)).toEqual([]);
    expect(findLeaks(harness.logs)).toEqual([]);
  });

  it('a key in a URL (path or query) is neither logged nor echoed', async () => {
    const logsBefore = harness.logs.length;
    const bodies: string[] = [];
    const get = async (path: string, headers: Record<string, string> = {}): Promise<void> => {
      const result = await request(`${harness.url}${path}`, { headers });
      bodies.push(result.text);
      result.headers.forEach((value, name) => bodies.push(`${name}: ${value}`));
    };
    // Key-shaped, no header: a provider key's format, a long opaque token, percent-encoded.
    await get(`/v1/nowhere/${leakKeys.plain.gpt}`);
    await get(`/v1/${encodeURIComponent(leakKeys.echoed.gpt).replace(/-/g, '%2D')}/x`);
    await get(`/healthz?key=${leakKeys.plain.timelygpt}&api_key=${leakKeys.echoed.timelygpt}`);
    await get(`/v1/jobs/${leakKeys.plain.claude}?x=${leakKeys.echoed.claude}`);
    // Not key-shaped, but the request's own key (sent in its header too).
    await get(`/v1/nowhere/${leakKeys.bad.claude}`, { 'x-claude-key': leakKeys.bad.claude });
    expect(bodies.some((body) => body.includes('NOT_FOUND'))).toBe(true);
    const lines = harness.logs.slice(logsBefore);
    expect(lines.some((line) => line.includes('incoming request'))).toBe(true);
    expect(findLeaks(bodies)).toEqual([]);
    expect(findLeaks(lines)).toEqual([]);
  });

  it('the leak detector itself finds a leaked piece', () => {
    expect(findLeaks([`prefix ${leakKeys.plain.gpt.slice(3, 13)} suffix`])).toHaveLength(1);
    expect(findLeaks(['emu-ratelimit- is a public prefix'])).toEqual([]);
  });
});
