/**
 * `POST /v1/generate`: one synchronous generation through the retry-and-fallback machine (docs/api.md).
 * The chain is the requested (or default) provider order with every provider that has no key header left
 * out; a client that goes away aborts the run, and an aborted run never counts toward a breaker.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { createAbortControllers } from '../../actors/abort-controllers.js';
import type { Attempt, FallbackPolicy, Gateway } from '../../actors/types.js';
import { sumUsd, type PriceTable } from '../../cost/index.js';
import type { DocumentStore } from '../../documents/index.js';
import type { ProviderId } from '../../providers/index.js';
import { createCostBudget, generateStudyTask, maxAnswerChars, resolveLang } from '../../study/index.js';
import { clientIdOf } from '../admission.js';
import { shareAddress } from '../client-address.js';
import { routeRateLimit, type RouteRateLimit } from '../rate-limit.js';
import type { Admission } from '../admission.js';
import { ApiError, errorCodes } from '../errors.js';
import type { ErrorCode } from '../errors.js';
import type { ApiKey } from '../../machines/types.js';
import { redactKeysDeep, scrubSecrets } from '../../security/redact.js';
import { keyHeaders, readProviderKeys, requireChain } from '../keys.js';
import { GenerationStream } from '../generation-stream.js';
import { documentSourceOrThrow, pageRangeSchema, pagesWithoutDocument } from '../document-source.js';
import type { TextPageMap } from '../../machines/job-types.js';
import { defaultSseMaxBufferBytes } from '../sse.js';
import {
  alreadyValidated,
  attemptSchema,
  errorBodySchema,
  fillComponentSchema,
  generationErrorBodySchema,
  maxCostUsdSchema,
  mcqComponentSchema,
  notesComponentSchema,
  outputLanguageSchema,
  providerIdSchema,
  providerOrderSchema,
  streamItemFields,
  taskSchema,
  usageSchema,
} from '../schemas.js';
import { eventStreamResponse, keySecurity } from '../openapi.js';

export interface GenerateRoutesOptions {
  readonly gateway: Gateway;
  readonly documentStore: DocumentStore;
  readonly defaultOrder: readonly ProviderId[];
  readonly fallbackMode: FallbackPolicy;
  /** Largest JSON body accepted, in bytes. */
  readonly bodyLimit: number;
  /** Longest `text`, in characters (MAX_TEXT_CHARS): longer is 413 TEXT_TOO_LONG. */
  readonly maxTextChars: number;
  /** Most parts one stage may split the text into (MAX_TEXT_PARTS). */
  readonly maxTextParts: number;
  /** The price table (built-in prices and MODEL_PRICES): what `options.maxCostUsd` is counted in. */
  readonly prices: PriceTable;
  /** The instance's generation slots and per-client shares. */
  readonly admission: Admission;
  /** Generations per address per window (RATE_LIMIT_GENERATIONS); none when absent. */
  readonly rateLimit?: Pick<RouteRateLimit, 'max' | 'windowSeconds' | 'salt'>;
  /** The origin handed to the gateway for a client address (client-address.ts). */
  readonly originOf: (ip: string) => string;
  /** Most bytes queued for a streaming client before it is dropped (64 KiB in the service). */
  readonly sseMaxBufferBytes?: number;
  /** SSE comment lines this often on a quiet generation stream (default 15 s). */
  readonly heartbeatMs?: number;
}

/** The client asked for the answer as an event stream (docs/api.md "Streaming"). */
function wantsEventStream(headers: IncomingHttpHeaders): boolean {
  const accept = headers.accept;
  return typeof accept === 'string' && accept.toLowerCase().includes('text/event-stream');
}

const generateBodySchema = z
  .strictObject({
    task: taskSchema.describe('notes, mcq or fill.'),
    documentId: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe('An id from POST /v1/documents. Exactly one of documentId / text.'),
    text: z.string().trim().min(1).optional().describe('The source text. Exactly one of documentId / text.'),
    pages: pageRangeSchema.optional(),
    providers: providerOrderSchema,
    options: z
      .strictObject({
        lang: outputLanguageSchema,
        count: z.int().min(1).max(50).optional().describe('Questions asked for (mcq, fill).'),
        notes: notesComponentSchema
          .optional()
          .describe('A notes result that grounds mcq/fill; generated first when absent.'),
        maxCostUsd: maxCostUsdSchema,
      })
      .optional(),
  })
  .superRefine((body, context) => {
    const sources = (body.documentId === undefined ? 0 : 1) + (body.text === undefined ? 0 : 1);
    if (sources !== 1) {
      context.addIssue({
        code: 'custom',
        message:
          sources === 0
            ? 'One of "text" or "documentId" is required.'
            : 'Give either "text" or "documentId", not both.',
        path: [],
      });
    }
  });

/** The 200 body: the study layer validated `result`; `meta` is the run's own typed bookkeeping. */
export const generateResponseSchema = alreadyValidated(
  z.object({
    task: taskSchema,
    result: z.union([notesComponentSchema, mcqComponentSchema, fillComponentSchema]),
    meta: z.object({
      provider: providerIdSchema,
      model: z.string(),
      fallback: z.boolean(),
      attempts: z.array(attemptSchema),
      usage: usageSchema,
      costUsd: z.number().nullable().describe("Sum of the attempts' costUsd; null when none could be priced."),
      lang: z
        .enum(['ko', 'en'])
        .describe('The language of the material: options.lang, or detected from the text.'),
      langSource: z
        .enum(['request', 'detected'])
        .describe('request: options.lang gave it; detected: read from the document.'),
    }).meta({ id: 'Meta', description: 'Which provider answered, after which attempts, at what usage.' }),
  }).meta({ id: 'Generation', description: "The answer of POST /v1/generate (and its stream's `done`)." }),
);

/** The events of a streamed generation (docs/api.md "Streaming"), each one's `data`. */
const generateStreamEvents = {
  item: z
    .object({ task: taskSchema, ...streamItemFields })
    .describe('One element of the result as soon as it is complete and valid, once each, in result order.'),
  delta: z.object({ provider: providerIdSchema, text: z.string() }).describe('Raw model output as it arrives (batched).'),
  attempt: attemptSchema,
  reset: z
    .object({ provider: providerIdSchema, reason: z.string() })
    .describe('The items sent so far are void; items start again from the next answer.'),
  done: generateResponseSchema,
  error: z
    .object({ status: z.number().int(), error: generationErrorBodySchema.shape.error })
    .describe('The status and error body the JSON API would have answered.'),
};

function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(errorCodes, code);
}

function scrubAttempt(attempt: Attempt, keys: readonly ApiKey[]): Attempt {
  return attempt.message === undefined
    ? attempt
    : { ...attempt, message: scrubSecrets(attempt.message, keys) };
}

/** A request's key headers (as `Secret`s) and admission client id, read once for its hook and its handler. */
interface Caller {
  readonly keys: ReturnType<typeof readProviderKeys>;
  readonly clientId: string;
  /** The share address (an IPv6 address by its /64). */
  readonly address: string;
}

export const generateRoutes: FastifyPluginAsyncZod<GenerateRoutesOptions> = async (app, options) => {
  const { gateway, documentStore } = options;
  /** Each request's controller (the client going away aborts its run), reused once as good as new. */
  const controllers = createAbortControllers();
  // Keyed by the request object: an entry (its keys among it) goes with the request.
  const callers = new WeakMap<object, Caller>();
  const callerOf = (request: { readonly headers: IncomingHttpHeaders; readonly ip: string }): Caller => {
    let caller = callers.get(request);
    if (caller === undefined) {
      const keys = readProviderKeys(request.headers);
      caller = { keys, clientId: clientIdOf(keys, request.ip), address: shareAddress(request.ip) };
      callers.set(request, caller);
    }
    return caller;
  };

  app.post(
    '/v1/generate',
    {
      bodyLimit: options.bodyLimit,
      // Per address, whatever (invented) keys it sends, counted before the body is read: a request
      // refused later (too large, nested too deep, over a share) still counts.
      config: {
        rateLimit:
          options.rateLimit === undefined
            ? false
            : routeRateLimit({ ...options.rateLimit, what: 'generations', variable: 'RATE_LIMIT_GENERATIONS', client: 'byAddress' }),
      },
      // Before a byte of the body is read: a client whose share of the slots is already taken
      // is refused without its body being parsed. (A body declared over `bodyLimit` is refused by Fastify
      // on its content-length alone, and its connection closed: test/isolation/rate-limit.test.ts.)
      // Callback-style (no promise per request); the keys and client id are read once, here.
      onRequest: (request, _reply, done) => {
        try {
          const caller = callerOf(request);
          options.admission.checkRoom(caller.clientId, caller.address);
        } catch (error) {
          done(error as ApiError);
          return;
        }
        done();
      },
      schema: {
        tags: ['generate'],
        summary:
          'Generate notes, MCQ or fill-in-the-blank questions through the first provider that answers.',
        description:
          `Provider keys travel in the headers ${Object.values(keyHeaders).join(', ')}. With \`Accept: text/event-stream\` ` +
          'the answer is an event stream once generation starts; everything refused before that is the JSON error.',
        security: keySecurity,
        body: generateBodySchema,
        response: {
          200: {
            description: 'The answer; or, asked with `Accept: text/event-stream`, its event stream.',
            content: {
              'application/json': { schema: generateResponseSchema },
              ...eventStreamResponse('The generation as it happens, ending with exactly one `done` or `error`.', generateStreamEvents).content,
            },
          },
          400: errorBodySchema,
          401: generationErrorBodySchema,
          402: generationErrorBodySchema,
          403: generationErrorBodySchema,
          404: errorBodySchema,
          413: generationErrorBodySchema,
          422: generationErrorBodySchema,
          429: generationErrorBodySchema,
          502: generationErrorBodySchema,
          503: generationErrorBodySchema,
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const { keys, clientId, address } = callerOf(request);
      const order = body.providers ?? options.defaultOrder;
      const chain = requireChain(order, keys);
      const secrets = chain.map((link) => link.apiKey);
      let text = body.text;
      if (text !== undefined && text.length > options.maxTextChars) {
        throw new ApiError(
          'TEXT_TOO_LONG',
          `The text has ${text.length} characters; at most ${options.maxTextChars} are accepted (MAX_TEXT_CHARS).`,
        );
      }
      let pageMap: TextPageMap | undefined;
      if (text !== undefined && body.pages !== undefined) throw pagesWithoutDocument();
      if (text === undefined) {
        const documentId = body.documentId ?? '';
        const document = await documentStore.get(documentId);
        if (document === undefined)
          throw new ApiError('DOCUMENT_NOT_FOUND', 'Unknown or expired documentId.');
        const source = documentSourceOrThrow(document, body.pages);
        text = source.text;
        pageMap = source.pageMap;
      }
      const language = resolveLang(body.options?.lang, text);

      // The notes that ground the questions ride in the prompts as well: megabytes of notes on a
      // 17-character text were weighed as one slot. A notes result is never longer than the longest notes
      // answer, so a longer one is no notes result.
      const notesChars = body.options?.notes === undefined ? 0 : JSON.stringify(body.options.notes).length;
      if (notesChars > maxAnswerChars('notes')) {
        throw new ApiError(
          'INVALID_REQUEST',
          `options.notes has ${notesChars} characters as JSON; a notes result has at most ${maxAnswerChars('notes')} (the longest notes answer).`,
        );
      }
      // Held from here to the answer: the text's split and every provider call count against the slots,
      // one per 25 000 characters of the text and the notes together.
      const release = options.admission.enter(clientId, text.length + notesChars, address);
      try {
        // The client going away (socket closed before the answer was written) aborts the run.
        const controller = controllers.take();
        const onClose = (): void => {
          if (!reply.raw.writableFinished) controller.abort();
        };
        reply.raw.on('close', onClose);
        // The server keeps half-closed sockets open (so a refusal still reaches a client that finished
        // sending, app.ts); a client that half-closes while its generation runs has gone away all the same.
        const socket = request.raw.socket;
        socket.on('end', onClose);
        // Streaming: committed (200, headers) when generation starts; a client that stops reading is dropped,
        // which aborts its run like a client that went away.
        const stream = wantsEventStream(request.headers)
          ? new GenerationStream(reply, {
              task: body.task,
              keys: secrets,
              maxBufferBytes: options.sseMaxBufferBytes ?? defaultSseMaxBufferBytes,
              heartbeatMs: options.heartbeatMs ?? 15_000,
              onDrop: () => {
                request.log.info('generation stream: client not reading, dropped');
                controller.abort();
              },
            })
          : undefined;
        let outcome;
        try {
          outcome = await generateStudyTask(gateway, {
            task: body.task,
            text,
            ...(pageMap === undefined ? {} : { pageMap }),
            lang: language.lang,
            ...(body.options?.count === undefined ? {} : { count: body.options.count }),
            ...(body.options?.notes === undefined ? {} : { notes: body.options.notes }),
            chain,
            policy: options.fallbackMode,
            signal: controller.signal,
            origin: options.originOf(request.ip),
            maxParts: options.maxTextParts,
            ...(body.options?.maxCostUsd === undefined ? {} : { budget: createCostBudget(body.options.maxCostUsd, options.prices) }),
            ...(stream === undefined
              ? {}
              : {
                  onStart: () => void stream.commit(),
                  onItem: (item) => stream.item(item),
                  onReset: (reset) => stream.reset(reset),
                  onAttempt: (attempt) => stream.attempt(scrubAttempt(attempt, secrets)),
                  onDelta: (provider, delta) => stream.delta(provider, delta),
                }),
          });
        } catch (error) {
          if (stream?.committed !== true) throw error;
          // The 200 is written: the failure goes as the stream's `error` event, as the JSON API would answer it.
          request.log.error({ err: error }, 'generation stream failed unexpectedly');
          stream.end('error', { status: 500, error: { code: 'INTERNAL_ERROR', message: 'The service failed unexpectedly. This is a bug; it has been logged.' } });
          return reply;
        } finally {
          reply.raw.off('close', onClose);
          socket.off('end', onClose);
          // Kept only if it never aborted and the run let go of its signal (abort-controllers.ts).
          controllers.giveBack(controller);
        }

        const attempts = outcome.attempts.map((attempt) => scrubAttempt(attempt, secrets));
        if (outcome.status === 'succeeded') {
          const answer = {
            task: body.task,
            // A model can echo the key it was called with: the answer is scrubbed like any message.
            result: redactKeysDeep(outcome.value, secrets),
            meta: {
              provider: outcome.provider,
              model: outcome.model,
              fallback: outcome.fallback,
              attempts,
              usage: outcome.usage,
              costUsd: sumUsd(attempts.map((attempt) => attempt.costUsd)),
              lang: language.lang,
              langSource: language.langSource,
            },
          };
          if (stream !== undefined) {
            stream.end('done', answer);
            return reply;
          }
          return reply.code(200).send(answer);
        }
        if (outcome.status === 'aborted') {
          request.log.info({ attempts: attempts.length }, 'client went away: generation aborted');
          // A streaming client is gone (or dropped): there is nobody to answer.
          if (stream?.committed === true) {
            stream.end('error', { status: errorCodes.REQUEST_ABORTED.status, error: new ApiError('REQUEST_ABORTED', 'The client went away before the answer.', { attempts }).toBody().error });
            return reply;
          }
          throw new ApiError('REQUEST_ABORTED', 'The client went away before the answer.', { attempts });
        }
        const code: ErrorCode = isErrorCode(outcome.code) ? outcome.code : 'PROVIDERS_UNAVAILABLE';
        const error = new ApiError(code, scrubSecrets(outcome.message, secrets), {
          attempts,
          ...(outcome.retryAfterSeconds === undefined
            ? {}
            : { retryAfterSeconds: Math.ceil(outcome.retryAfterSeconds) }),
        });
        if (stream?.committed === true) {
          stream.end('error', { status: error.statusCode, ...error.toBody() });
          return reply;
        }
        // The error handler renders the body; headers set on the reply survive it.
        if (outcome.retryAfterSeconds !== undefined)
          void reply.header('retry-after', String(Math.ceil(outcome.retryAfterSeconds)));
        throw error;
      } finally {
        release();
      }
    },
  );
};
