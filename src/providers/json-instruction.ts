import type { GenerationRequest } from './types.js';

/**
 * The strict-JSON instruction appended to the system prompt for providers without a schema-bound
 * output mode in our call (Anthropic; TimelyGPT besides its `output_type: "JSON"`).
 */
export function withJsonInstruction(request: GenerationRequest): string {
  return `${request.system}

Answer with exactly one JSON object and nothing else: no prose, no Markdown, no code fences.
It must follow this JSON schema (task "${request.task}"):
${JSON.stringify(request.jsonSchema)}`;
}
