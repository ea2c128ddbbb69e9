import { invalidParameter } from '../../../common/errors.js';
import { trimLeftSpace } from './go-text.js';
import {
  type Directives,
  type DockerfileNode,
  isComment,
  jsonForm,
  MAX_LINE_BYTES,
  newNodeFromLine,
  parseWords,
  processLine,
  setEscapeToken,
  splitCommand,
  trimContinuation,
} from './parser.js';
import { processWords } from './shell-words.js';

/** Reading a whole Dockerfile (buildkit's parser.Parse): lines, continuations, heredoc bodies, each instruction with its lines. */
/** A here-document found on an instruction's line (`<<EOF`, `<<-EOF`, `<<"EOF"`). */
export interface ScannedHeredoc {
  name: string;
  /** The body as written (lines with their "\n"); leading tabs are not stripped here. */
  content: string;
  expand: boolean;
  /** `<<-`: leading tabs of the body and terminator are ignored. */
  chomp: boolean;
}

/** An instruction with where it stands in the file. */
export interface ScannedNode extends DockerfileNode {
  startLine: number;
  endLine: number;
  heredocs: ScannedHeredoc[];
}

export interface ScanResult {
  nodes: ScannedNode[];
  escapeToken: string;
  /** The `# syntax=` directive's value. */
  syntax?: string;
  /** dockerd's warning lines (printed joined by "\n"): one per instruction with an empty continuation line, then one closing note. */
  warnings: string[];
}

/** A located parse error: `dockerfile parse error line N: …` (dockerd's words). */
export const lineError = (line: number, err: unknown): Error =>
  invalidParameter(
    `dockerfile parse error line ${line}: ${err instanceof Error ? err.message : String(err)}`,
  );

export const HEREDOC_WORD_RE = /^(\d*)<<(-?)([^<]*)$/;
export const HEREDOC_INSTRUCTIONS = new Set(['run', 'copy', 'add']);

/** buildkit's ParseHeredoc: a word `<<NAME` / `<<-NAME` / `<<"NAME"` as a heredoc, else undefined. */
export function parseHeredocWord(word: string): Omit<ScannedHeredoc, 'content'> | undefined {
  const m = HEREDOC_WORD_RE.exec(word);
  const rest = m?.[3] ?? '';
  if (!m || rest === '') return undefined;
  const words = processWords(rest, [], '\\');
  if (words.length !== 1) return undefined;
  const name = words[0] as string;
  const quotes = (s: string): number => (s.match(/["']/g) ?? []).length;
  return { name, expand: quotes(name) === quotes(rest), chomp: m[2] === '-' };
}

/** The heredocs a RUN/COPY/ADD line (or an ONBUILD of one) opens, in order. */
export function heredocsOfNode(node: DockerfileNode, line: string): Array<Omit<ScannedHeredoc, 'content'>> {
  let cmd = node.value;
  let json = node.json;
  if (cmd === 'onbuild' && node.args.length > 0) {
    // The trigger as written after ONBUILD (and its flags).
    const child = splitCommand(splitCommand(line).rest);
    cmd = child.cmd;
    json = jsonForm(child.rest) !== undefined;
  }
  if (!HEREDOC_INSTRUCTIONS.has(cmd) || json) return [];
  const docs: Array<Omit<ScannedHeredoc, 'content'>> = [];
  for (const word of parseWords(line, '\\')) {
    const doc = parseHeredocWord(word);
    if (doc) docs.push(doc);
  }
  return docs;
}

export const stripLeadingTabs = (s: string): string => s.replace(/^\t+/, '');

/**
 * buildkit's parser.Parse: directives, comments, continuations, and (with `heredocs`) the bodies
 * of here-documents of RUN/COPY/ADD, each instruction with its first and last line (`lineErrors`:
 * errors say the line, as the build's do).
 */
export function scanDockerfile(text: string, opts: { heredocs: boolean; lineErrors: boolean }): ScanResult {
  const d: Directives = {
    escapeToken: '\\',
    continuation: /$^/,
    done: false,
    seen: new Set(),
    values: new Map(),
  };
  setEscapeToken(d, '\\');
  // bufio.Scanner: lines without their newline and one trailing CR; a line of 64KiB or more
  // stops the scan.
  const raw = text === '' ? [] : text.split('\n');
  if (text.endsWith('\n')) raw.pop();
  let tooLong = false;
  const lines: string[] = [];
  for (const l of raw) {
    if (Buffer.byteLength(l, 'utf8') >= MAX_LINE_BYTES) {
      tooLong = true;
      break;
    }
    lines.push(l.endsWith('\r') ? l.slice(0, -1) : l);
  }
  const nodes: ScannedNode[] = [];
  const warnings: string[] = [];
  let i = 0;
  const at = <T>(line: number, f: () => T): T => {
    try {
      return f();
    } catch (err) {
      throw opts.lineErrors ? lineError(line, err) : err;
    }
  };
  while (i < lines.length) {
    let first = lines[i] as string;
    if (i === 0 && first.startsWith('\ufeff')) first = first.slice(1);
    const processed = at(i + 1, () => processLine(d, first, true));
    i++;
    const startLine = i;
    let [line, endOfLine] = trimContinuation(processed, d);
    if (endOfLine && line === '') continue;
    let emptyContinuation = false;
    while (!endOfLine && i < lines.length) {
      const next = lines[i] as string;
      const cont = at(i + 1, () => processLine(d, next, false));
      i++;
      if (isComment(next)) continue;
      if (trimLeftSpace(cont) === '') {
        emptyContinuation = true;
        continue;
      }
      let part: string;
      [part, endOfLine] = trimContinuation(cont, d);
      line += part;
    }
    if (emptyContinuation) {
      warnings.push(`[WARNING]: Empty continuation line found in:\n    ${line}`);
    }
    const node = at(startLine, () => newNodeFromLine(line, d));
    const heredocs: ScannedHeredoc[] = [];
    if (opts.heredocs) {
      for (const doc of at(startLine, () => heredocsOfNode(node, line))) {
        let content = '';
        let terminated = false;
        while (i < lines.length) {
          const body = lines[i] as string;
          i++;
          if ((doc.chomp ? stripLeadingTabs(body) : body) === doc.name) {
            terminated = true;
            break;
          }
          content += `${body}\n`;
        }
        if (!terminated) throw lineError(startLine, new Error('unterminated heredoc'));
        heredocs.push({ ...doc, content });
      }
    }
    nodes.push({ ...node, startLine, endLine: i, heredocs });
  }
  if (nodes.length === 0) throw invalidParameter('file with no instructions');
  if (tooLong)
    throw invalidParameter(`dockerfile line greater than max allowed size of ${MAX_LINE_BYTES - 1}`);
  if (warnings.length > 0)
    warnings.push('[WARNING]: Empty continuation lines will become errors in a future release.');
  const syntax = d.values.get('syntax');
  return { nodes, escapeToken: d.escapeToken, warnings, ...(syntax !== undefined ? { syntax } : {}) };
}

/** Parse a Dockerfile into its instructions and escape token, as buildkit's parser.Parse does. */
export function parseDockerfile(text: string): { nodes: DockerfileNode[]; escapeToken: string } {
  const { nodes, escapeToken } = scanDockerfile(text, { heredocs: false, lineErrors: false });
  return {
    nodes: nodes.map(({ value, original, flags, args, json }) => ({ value, original, flags, args, json })),
    escapeToken,
  };
}
