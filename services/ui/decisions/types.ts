// What the Goal page's "Decisions" block shows: things a human can do about a goal now, each
// with its buttons. A page renders them and the client script re-renders them live from the
// same JSON; a kind of decision is one provider module (see decisions/index.ts).
import type { Hono } from 'hono';
import type { GoalRecord } from '../../../shared/goal/store.ts';
import type { UiContext, UiEnv } from '../context.ts';

/** A field sent with an action: a free text (a note, a reason), a number (a budget) or files. */
export interface DecisionField {
  name: string;
  label: string;
  /** `files`: any number of files; the form is sent as multipart. */
  kind: 'text' | 'number' | 'files';
  /** Text: the most characters it takes (the form says so; the server refuses more). */
  maxChars?: number;
  /** Numbers: `1` for whole numbers, `any` for fractions too. The server checks again. */
  step?: '1' | 'any';
}

/** One button: a form POSTing to `path` (with the page's CSRF token), maybe with fields. */
export interface DecisionAction {
  label: string;
  path: string;
  fields?: DecisionField[];
  tone: 'primary' | 'danger';
}

export interface DecisionView {
  /** Unique within the goal (a DOM id). */
  id: string;
  kind: string;
  title: string;
  detail?: string;
  /** A block of text shown whole, as is (a tool call's full input): model text, escaped. */
  content?: string;
  actions: DecisionAction[];
}

export interface DecisionProvider {
  /** What is pending for this goal now. */
  pending(ctx: UiContext, goal: GoalRecord): Promise<DecisionView[]> | DecisionView[];
  /** The POST routes behind its actions (the app checks the token and the CSRF token first). */
  routes(app: Hono<UiEnv>, ctx: UiContext): void;
}
