// What the cycles tests share: a Messages-API model that routes each request by the scenario
// tag in its goal or instruction, the requests a scenario sent, and metric values read from
// every process of the fleet.
import {
  type DeepqRole,
  firstUserText,
  type Handler,
  type HandlerResult,
  type MessagesApiServer,
  type MessagesBody,
  type RecordedRequest,
  roleOf,
  text,
} from '../../testing/messages-api-server.ts';

export type Scenario = (
  body: MessagesBody,
  role: DeepqRole,
  task: string,
) => HandlerResult | undefined | Promise<HandlerResult>;

/** A handler that asks each scenario (by its tag, found in the task) to answer; `OK` otherwise. */
export function scenarioHandler(scenarios: Record<string, Scenario>): Handler {
  return (body) => {
    const task = firstUserText(body);
    for (const [tag, answer] of Object.entries(scenarios)) {
      if (task.includes(tag)) return answer(body, roleOf(body), task) ?? text('OK');
    }
    return text('OK');
  };
}

/** The requests of one scenario (tag), from one role, in order. */
export function requestsOf(server: MessagesApiServer, tag: string, role: DeepqRole): RecordedRequest[] {
  return server.messageRequests().filter((r) => roleOf(r.body) === role && firstUserText(r.body).includes(tag));
}

/** The `Cycle: N` of a planner's or reflector's task. */
export function cycleOf(task: string): number {
  return Number(/^Cycle: (\d+)$/m.exec(task)?.[1] ?? 0);
}

export const json = (value: unknown) => text(JSON.stringify(value));

/** A research subtask of the plan JSON the tests' planners write. */
export const research = (tag: string, artifact: string, extra: Record<string, unknown> = {}) => ({
  role: 'research-specialist',
  instruction: `${tag} write ${artifact}`,
  expected_artifact: artifact,
  read_files: [],
  ...extra,
});

export { metricSum } from '../../testing/fleet.ts';
