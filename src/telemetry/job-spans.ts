/**
 * Spans for background jobs. A job outlives the request that created it, so its spans are children of
 * that request's span (the context active when the job was created or resumed): the caller's trace
 * shows the request, then each stage (`job.stage <stage>`), each part of it (`job.part <stage>`, one per
 * provider run of the stage) and under each part its attempts. A job restored at start-up has no
 * request: its stages start traces of their own.
 */
import { context, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import type { Gateway, GenerateInput, GenerateOutcome } from '../actors/types.js';
import type { JobTrace, JobTracer } from '../jobs/index.js';

/** Ends `span` with the status of a settled outcome (`status` of a run, of a stage). */
function endWith(span: Span, status: string, code?: string): void {
  span.setAttribute('studyhelper.outcome', status);
  if (status === 'failed') span.setStatus({ code: SpanStatusCode.ERROR, message: code ?? 'failed' });
  span.end();
}

function endWithError(span: Span, error: unknown): never {
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : 'error' });
  span.end();
  throw error;
}

/** Job tracing on `tracer`. */
export function createJobTracer(tracer: Tracer): JobTracer {
  return {
    job(jobId: string): JobTrace {
      const parent = context.active();
      return {
        async stage(stage, gateway, run) {
          const span = tracer.startSpan(
            `job.stage ${stage}`,
            { attributes: { 'studyhelper.job.id': jobId, 'studyhelper.job.stage': stage } },
            parent,
          );
          const stageContext = trace.setSpan(parent, span);
          let parts = 0;
          const partGateway: Gateway = {
            ...gateway,
            generate<T>(input: GenerateInput<T>): Promise<GenerateOutcome<T>> {
              parts += 1;
              const part = tracer.startSpan(
                `job.part ${stage}`,
                {
                  attributes: {
                    'studyhelper.job.id': jobId,
                    'studyhelper.job.stage': stage,
                    'studyhelper.job.part': parts,
                    'studyhelper.task': input.request.task,
                  },
                },
                stageContext,
              );
              return context
                .with(trace.setSpan(stageContext, part), () => gateway.generate(input))
                .then(
                  (outcome) => {
                    endWith(part, outcome.status, outcome.status === 'failed' ? outcome.code : undefined);
                    return outcome;
                  },
                  (error: unknown) => endWithError(part, error),
                );
            },
          };
          try {
            const outcome = await context.with(stageContext, () => run(partGateway));
            const status =
              typeof outcome === 'object' && outcome !== null && 'status' in outcome
                ? String(outcome.status)
                : 'succeeded';
            const code =
              typeof outcome === 'object' && outcome !== null && 'code' in outcome
                ? String(outcome.code)
                : undefined;
            if (
              typeof outcome === 'object' &&
              outcome !== null &&
              'cached' in outcome &&
              outcome.cached === true
            )
              span.setAttribute('studyhelper.cached', true);
            endWith(span, status, code);
            return outcome;
          } catch (error) {
            return endWithError(span, error);
          }
        },
      };
    },
  };
}
