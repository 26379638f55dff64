// The reflector's output contract: one decision and its reason.
import { jsonContract } from '../../shared/agent/output-contracts.ts';
import { ReflectionSchema } from '../../shared/goal/plan.ts';

export const reflectionContract = jsonContract(
  'reflection',
  'JSON {"decision": "continue"|"replan"|"end"|"escalate", "reason": str, "revise": [artifact names] (optional)}',
  ReflectionSchema,
);
