/**
 * The paths a model-based test walks on the running service: for every edge of the model's graph (a
 * vertex is a state value with its context), the shortest path to the edge's source and then the edge.
 * So every state and every transition of the model is driven at least once, each path from the initial
 * state (the service is reset between paths), and no path is longer than it must be.
 */
import type { AnyStateMachine, EventFromLogic } from 'xstate';
import { createTestModel, serializeSnapshot, type TestPath } from 'xstate/graph';

type ModelOf<TMachine extends AnyStateMachine> = ReturnType<typeof createTestModel<TMachine>>;

export interface EdgeCover<TMachine extends AnyStateMachine> {
  readonly model: ModelOf<TMachine>;
  /** One path per edge, in the adjacency map's order. */
  readonly paths: TestPath<ReturnType<ModelOf<TMachine>['testLogic']['transition']>, EventFromLogic<TMachine>>[];
  readonly vertices: number;
  readonly edges: number;
}

/**
 * The edge cover of `machine`. `events` gives the payloads of an event type that has several (the
 * model's own event types without one are explored as `{ type }`). Vertices are states (the default
 * test model keys them by the transition that reached them too, which would multiply the paths).
 */
export function edgeCover<TMachine extends AnyStateMachine>(
  machine: TMachine,
  events?: (snapshot: ReturnType<ModelOf<TMachine>['testLogic']['transition']>) => EventFromLogic<TMachine>[],
): EdgeCover<TMachine> {
  const model = createTestModel(machine, {
    serializeTransition: () => '',
    ...(events === undefined ? {} : { events }),
  }) as ModelOf<TMachine>;
  const paths: EdgeCover<TMachine>['paths'] = [];
  // Every vertex's own shortest path, also those that are a prefix of another's (deduplicated by default).
  const shortest = new Map<string, (typeof paths)[number]>(
    model.getShortestPaths({ allowDuplicatePaths: true }).map((path) => [String(serializeSnapshot(path.state)), path] as const),
  );
  const adjacency = model.getAdjacencyMap();
  let edges = 0;
  for (const [key, vertex] of Object.entries(adjacency) as [string, { transitions: Record<string, { event: EventFromLogic<TMachine> }> }][]) {
    // The initial vertex is reached by no event.
    const prefix = (shortest.get(key)?.steps ?? []).map((step) => step.event).filter((event) => event.type !== 'xstate.init');
    if (prefix.length === 0 && key !== String(serializeSnapshot(machine.getInitialSnapshot(undefined as never))))
      throw new Error(`no shortest path to ${key}`);
    for (const { event } of Object.values(vertex.transitions)) {
      edges += 1;
      const [path] = model.getPathsFromEvents([...prefix, event]);
      if (path === undefined) throw new Error(`no path for ${key} + ${JSON.stringify(event)}`);
      paths.push(path);
    }
  }
  return { model, paths, vertices: Object.keys(adjacency).length, edges };
}

;

/**
 * `path.test` skips an event without an executor and a state without a test, silently: a model that
 * grows an event or a state would be walked without being checked. Fails unless every event type of
 * `paths` but the initial one has an executor and every state reached has a test.
 */
export function expectComplete(
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any model's paths
  paths: readonly TestPath<any, { type: string }>[],
  executors: Readonly<Record<string, unknown>>,
  stateTests: Readonly<Record<string, unknown>>,
): void {
  for (const path of paths) {
    for (const step of path.steps) {
      if (step.event.type !== 'xstate.init' && executors[step.event.type] === undefined)
        throw new Error(`no executor for the model's event ${step.event.type}`);
      if (!Object.keys(stateTests).some((key) => step.state.matches(key)))
        throw new Error(`no test for the model's state ${JSON.stringify((step.state as { value?: unknown }).value)}`);
    }
  }
}
