/**
 * The baselines the service is measured against, each a Fastify server in its own process:
 * - `sdk` (A): a client calling the provider by hand through the same SDK, the simplest way: the same
 *   request the gpt adapter sends (same prompt, same json_schema), not streamed, one `openai` client for
 *   the process, the answer's content parsed as JSON and returned.
 * - `sdk-stream` (S): A streamed by hand, as the adapter streams every call (`stream: true` with usage, the
 *   chunks iterated and their content joined): the like-for-like baseline, whose cost grows with the events
 *   an answer takes as the service's does.
 * - `sdk-transport` (S′): S with the `fetch` the service's adapters send through (undici's `request`,
 *   src/providers/upstream-fetch.ts) instead of the global `fetch`: what streaming the SDK yourself costs
 *   on the service's transport, so B − S′ is the resilience layer's own cost.
 * - `passthrough` (floor): the request body forwarded with `fetch` (undici, as the SDK uses) and the
 *   upstream body returned as is: no SDK, no validation.
 */
import Fastify from 'fastify';
import OpenAI from 'openai';
// The prompt module alone (and zod through its JSON schema): not the study module's tokenizer and checks.
import { buildNotesRequest } from '../../src/study/prompts.js';
import { eventStream, upstreamFetch } from '../../src/providers/upstream-fetch.js';
import { serveParent } from './child-ipc.js';

const mode = process.env['BASELINE_MODE'];
const upstream = process.env['OPENAI_BASE_URL'] ?? '';
const model = process.env['GPT_MODEL'] ?? 'gpt-bench';
const apiKey = 'bench-fake-gpt-key-0001';

interface Body {
  readonly text: string;
}

function chatBody(text: string) {
  const request = buildNotesRequest({ text, lang: 'en' });
  return {
    model,
    max_completion_tokens: request.maxOutputTokens,
    messages: [
      { role: 'system' as const, content: request.system },
      ...request.messages.map((message) => ({ role: message.role, content: message.content })),
    ],
    response_format: {
      type: 'json_schema' as const,
      json_schema: { name: request.task, schema: { ...request.jsonSchema }, strict: false },
    },
  };
}

const app = Fastify({ logger: false });
if (mode === 'sdk') {
  const client = new OpenAI({ apiKey, baseURL: upstream, maxRetries: 0, organization: null, project: null });
  app.post<{ Body: Body }>('/direct', async (request) => {
    const completion = await client.chat.completions.create(chatBody(request.body.text));
    return { task: 'notes', result: JSON.parse(completion.choices[0]?.message.content ?? '') as unknown };
  });
} else if (mode === 'sdk-stream' || mode === 'sdk-transport') {
  const client = new OpenAI({
    apiKey,
    baseURL: upstream,
    maxRetries: 0,
    organization: null,
    project: null,
    ...(mode === 'sdk-transport' ? { fetch: upstreamFetch } : {}),
  });
  app.post<{ Body: Body }>('/direct', async (request) => {
    const stream = await client.chat.completions.create(
      { ...chatBody(request.body.text), stream: true, stream_options: { include_usage: true } },
      // As the adapter asks: the service's transport then hands the body on as it arrives.
      { headers: { accept: eventStream } },
    );
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
    return { task: 'notes', result: JSON.parse(content) as unknown };
  });
} else if (mode === 'passthrough') {
  app.post<{ Body: Body }>('/passthrough', async (request, reply) => {
    const response = await fetch(`${upstream}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      body: JSON.stringify(chatBody(request.body.text)),
    });
    return reply
      .code(response.status)
      .type('application/json')
      .send(await response.text());
  });
} else if (mode === 'static') {
  app.post('/static', async () => ({ ok: true }));
} else {
  throw new Error(`BASELINE_MODE must be sdk, sdk-stream, sdk-transport or passthrough, got ${String(mode)}`);
}
const url = await app.listen({ port: 0, host: '127.0.0.1' });
serveParent({
  url,
  path: `/${mode === 'sdk' || mode === 'sdk-stream' || mode === 'sdk-transport' ? 'direct' : mode}`,
});
