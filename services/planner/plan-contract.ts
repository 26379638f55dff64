// The planner's output contract: a plan (shared/goal/plan.ts) plus the rules that need
// context: known roles, unique artifact names, read_files naming files that exist.
import type { z } from 'zod';
import { jsonContract, type OutputContract } from '../../shared/agent/output-contracts.ts';
import { type Plan, PlanSchema } from '../../shared/goal/plan.ts';

export function planSchemaFor(knownRoles: string[], existingFiles: string[]) {
  const files = new Set(existingFiles);
  return PlanSchema.superRefine((plan, ctx) => {
    const seen = new Set<string>();
    plan.subtasks.forEach((t, i) => {
      const at = (...path: (string | number)[]) => ['subtasks', i, ...path];
      if (!knownRoles.includes(t.role)) {
        const message = `unknown role ${JSON.stringify(t.role)} (known: ${knownRoles.join(', ')})`;
        ctx.addIssue({ code: 'custom', path: at('role'), message });
      }
      if (seen.has(t.expected_artifact)) {
        const message = `duplicate artifact name ${JSON.stringify(t.expected_artifact)}`;
        ctx.addIssue({ code: 'custom', path: at('expected_artifact'), message });
      }
      seen.add(t.expected_artifact);
      t.read_files.forEach((f, j) => {
        if (files.has(f)) return;
        const message = `read_files names ${JSON.stringify(f)}, which does not exist`;
        ctx.addIssue({ code: 'custom', path: at('read_files', j), message });
      });
    });
  });
}

export function planContract(roles: string[], files: string[]): OutputContract<Plan> {
  return jsonContract(
    'plan',
    'JSON {"subtasks": [{"role", "instruction", "expected_artifact", "read_files"}]} with 1-5 subtasks, ' +
      'known roles, unique artifact names, and read_files naming existing files',
    planSchemaFor(roles, files) as z.ZodType<Plan>,
  );
}
