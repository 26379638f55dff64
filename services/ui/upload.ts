// The enqueue and resume forms' files: what the browser sent, as the goal's input files. A browser sends a
// file's base name, never its folder; names and contents are checked as `enqueue --file` checks
// them, and a refused file names itself.
import { type InputFile, inputSizeProblem, inputText } from '../../cli/goal-request.ts';
import { ValidationError } from '../../shared/errors.ts';

/** The most the form's files may take in all: a request body past it is refused (413). */
export const UPLOAD_MAX_BYTES = 16 * 1024 * 1024;

/** The form's `files` field (none, one, or several; an empty file input sends a nameless one). */
export async function uploadedFiles(value: unknown, maxArtifactBytes: number): Promise<InputFile[]> {
  const sent = (Array.isArray(value) ? value : [value]).filter((v): v is File => v instanceof File && v.name !== '');
  const files: InputFile[] = [];
  for (const f of sent) {
    const refuse = (why: string) => new ValidationError(`file ${JSON.stringify(f.name)}: ${why}`);
    const tooBig = inputSizeProblem(f.size, maxArtifactBytes);
    if (tooBig) throw refuse(tooBig);
    const read = inputText(new Uint8Array(await f.arrayBuffer()));
    if ('problem' in read) throw refuse(read.problem);
    files.push({ name: f.name, content: read.text });
  }
  return files;
}
