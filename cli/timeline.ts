// Turns a goal's event stream into the `watch` view: a tree of cycles, then subtasks with
// role, state, duration and bytes; or one plain line per event when not on a TTY.
import type { TimelineEvent } from '../shared/goal/store.ts';

interface SubtaskView { index: number; role: string; artifact: string; state: string; ms?: number; bytes?: number; reason?: string; attempt?: number }
interface CycleView { step: number; subtasks: Map<number, SubtaskView>; decision?: string; reason?: string; evicted: number }

export class TimelineView {
  readonly cycles = new Map<number, CycleView>();
  status = 'queued';
  goal = '';
  startedAt = 0;
  finishedReason?: string;

  private cycle(step: number): CycleView {
    let c = this.cycles.get(step);
    if (!c) {
      c = { step, subtasks: new Map(), evicted: 0 };
      this.cycles.set(step, c);
    }
    return c;
  }

  apply(e: TimelineEvent): void {
    const step = Number(e.step ?? 0);
    switch (e.type) {
      case 'created':
        this.goal = String(e.goal ?? '');
        this.startedAt = e.at;
        break;
      case 'planned':
      case 'dispatched': {
        const c = this.cycle(step);
        const list = (e.subtasks as { index?: number; role: string; artifact: string }[]) ?? [];
        list.forEach((t, i) => {
          const idx = t.index ?? i;
          if (!c.subtasks.has(idx)) c.subtasks.set(idx, { index: idx, role: t.role, artifact: t.artifact, state: e.type === 'dispatched' ? 'queued' : 'planned' });
          else if (e.type === 'dispatched' && c.subtasks.get(idx)!.state === 'planned') c.subtasks.get(idx)!.state = 'queued';
        });
        this.status = 'running';
        break;
      }
      case 'subtask_started':
      case 'subtask_finished':
      case 'subtask_failed': {
        const c = this.cycle(step);
        const idx = Number(e.index);
        const t = c.subtasks.get(idx) ?? { index: idx, role: String(e.role), artifact: String(e.artifact), state: 'queued' };
        t.state = e.type === 'subtask_started' ? 'running' : e.type === 'subtask_finished' ? 'done' : 'failed';
        if (e.ms !== undefined) t.ms = Number(e.ms);
        if (e.bytes !== undefined) t.bytes = Number(e.bytes);
        if (e.reason) t.reason = String(e.reason);
        if (e.attempt) t.attempt = Number(e.attempt);
        c.subtasks.set(idx, t);
        break;
      }
      case 'evicted':
        this.cycle(step).evicted++;
        break;
      case 'reflected': {
        const c = this.cycle(step);
        c.decision = String(e.decision);
        c.reason = String(e.reason ?? '');
        break;
      }
      case 'paused':
        this.status = 'awaiting_human';
        this.finishedReason = String(e.reason ?? `paused for ${e.pausedFor}`);
        break;
      case 'resumed':
        this.status = 'running';
        break;
      case 'finished':
        this.status = String(e.status);
        if (e.reason) this.finishedReason = String(e.reason);
        break;
    }
  }

  render(): string {
    const lines = [`goal: ${this.goal.slice(0, 100)}  [${this.status}]`];
    for (const c of [...this.cycles.values()].sort((a, b) => a.step - b.step)) {
      lines.push(`└─ cycle ${c.step}${c.decision ? `  → ${c.decision}${c.reason ? ` (${c.reason.slice(0, 80)})` : ''}` : ''}${c.evicted ? `  [${c.evicted} evicted]` : ''}`);
      const subs = [...c.subtasks.values()].sort((a, b) => a.index - b.index);
      subs.forEach((t, i) => {
        const branch = i === subs.length - 1 ? '└─' : '├─';
        const extra = [t.ms !== undefined ? `${(t.ms / 1000).toFixed(2)}s` : '', t.bytes !== undefined ? `${t.bytes} B` : '', t.reason ? t.reason.slice(0, 80) : ''].filter(Boolean).join(', ');
        lines.push(`   ${branch} [${t.index}] ${t.role.padEnd(20)} ${t.artifact.padEnd(18)} ${t.state}${extra ? `  (${extra})` : ''}`);
      });
    }
    if (this.finishedReason && this.status !== 'running') lines.push(`reason: ${this.finishedReason}`);
    return lines.join('\n');
  }
}

/** One line per event, for logs and non-TTY output. */
export function formatEventLine(e: TimelineEvent, t0: number): string {
  const at = `+${((e.at - t0) / 1000).toFixed(2)}s`.padStart(8);
  const step = e.step !== undefined ? `cycle ${e.step} ` : '';
  switch (e.type) {
    case 'created': return `${at} created: ${String(e.goal ?? '').slice(0, 100)}`;
    case 'planned': return `${at} ${step}planned ${(e.subtasks as unknown[]).length} subtask(s): ${(e.subtasks as { role: string; artifact: string }[]).map((s) => `${s.role}→${s.artifact}`).join(', ')}`;
    case 'dispatched': return `${at} ${step}dispatched`;
    case 'subtask_started': return `${at} ${step}[${e.index}] ${e.role} started ${e.artifact}${Number(e.attempt) > 1 ? ` (attempt ${e.attempt})` : ''}`;
    case 'subtask_finished': return `${at} ${step}[${e.index}] ${e.role} finished ${e.artifact} (${e.bytes} B, ${(Number(e.ms) / 1000).toFixed(2)}s)`;
    case 'subtask_failed': return `${at} ${step}[${e.index}] ${e.role} FAILED ${e.artifact}: ${e.reason ?? ''}`;
    case 'evicted': return `${at} ${step}evicted ${e.name} (${e.reason})`;
    case 'reflected': return `${at} ${step}reflected: ${e.decision} (${String(e.reason ?? '').slice(0, 120)})`;
    case 'paused': return `${at} ${step}paused for a human (${e.pausedFor}): ${String(e.reason ?? e.decision ?? '')}`;
    case 'resumed': return `${at} ${step}resumed: ${e.action}`;
    case 'finished': return `${at} finished: ${e.status}${e.reason ? ` (${e.reason})` : ''}`;
    default: return `${at} ${step}${e.type}`;
  }
}
