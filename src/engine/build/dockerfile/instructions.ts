import { invalidParameter } from '../../../common/errors.js';
import { BuilderFlags, parseCommand, shellDependentCmdLine } from '../../images/dockerfile/instructions.js';
import { parseHeredocWord, type ScannedNode } from '../../images/dockerfile/scan.js';
import type { Heredoc, Instruction } from '../build.types.js';
import { parseRunMount } from './mounts.js';

/** One scanned Dockerfile node → a typed build instruction (buildkit's instructions.ParseInstruction, dockerd's words). */

export const STAGE_NAME_RE = /^[a-z][a-z0-9-_.]*$/;

/** FROM's parts (a stage starts here). */
export interface FromInstruction {
  base: string;
  name?: string;
  platform?: string;
}

const chompTabs = (s: string): string => s.replace(/^\t+/gm, '');

export function heredocsOf(node: ScannedNode): Heredoc[] {
  return node.heredocs.map((h) => ({
    name: h.name,
    content: h.chomp ? chompTabs(h.content) : h.content,
    expand: h.expand,
  }));
}

export function parseFrom(node: ScannedNode): FromInstruction {
  const flags = new BuilderFlags(node.flags);
  const platform = flags.addString('platform');
  flags.parse();
  const args = node.args;
  if (!(args.length === 1 || (args.length === 3 && (args[1] as string).toLowerCase() === 'as'))) {
    throw invalidParameter('FROM requires either one or three arguments');
  }
  const from: FromInstruction = { base: args[0] as string };
  if (args.length === 3) {
    const name = (args[2] as string).toLowerCase();
    if (!STAGE_NAME_RE.test(name)) {
      throw invalidParameter(
        `invalid name for build stage: "${args[2]}", name can't start with a number or contain symbols`,
      );
    }
    from.name = name;
  }
  if (platform.value !== '') from.platform = platform.value;
  return from;
}

/** ARG's words: `name` or `name=default` (raw). */
export function parseArgs(node: ScannedNode): Array<{ name: string; value?: string }> {
  new BuilderFlags(node.flags).parse();
  if (node.args.length === 0) throw invalidParameter('ARG requires at least one argument');
  return node.args.map((word) => {
    const eq = word.indexOf('=');
    return eq < 0 ? { name: word } : { name: word.slice(0, eq), value: word.slice(eq + 1) };
  });
}

const NETWORKS = ['default', 'none', 'host'] as const;

function parseRun(node: ScannedNode): Instruction {
  const flags = new BuilderFlags(node.flags);
  const mountFlag = flags.addStrings('mount');
  const network = flags.addString('network');
  const security = flags.addString('security');
  flags.parse();
  if (flags.isUsed('security') && !['sandbox', 'insecure'].includes(security.value)) {
    throw invalidParameter(`unsupported security mode "${security.value}"`);
  }
  const out: Instruction = {
    kind: 'run',
    line: node.startLine,
    endLine: node.endLine,
    original: node.original,
    cmdLine: shellDependentCmdLine(node, false).cmdLine ?? [],
    prependShell: !node.json,
    heredocs: heredocsOf(node),
    mounts: mountFlag.values.map(parseRunMount),
  };
  if (flags.isUsed('network')) {
    if (!(NETWORKS as readonly string[]).includes(network.value)) {
      throw invalidParameter(`unsupported network mode "${network.value}"`);
    }
    out.network = network.value as (typeof NETWORKS)[number];
  }
  return out;
}

function parseCopy(node: ScannedNode, kind: 'copy' | 'add'): Instruction {
  const flags = new BuilderFlags(node.flags);
  const chown = flags.addString('chown');
  const chmod = flags.addString('chmod');
  const link = flags.addBool('link');
  const exclude = flags.addStrings('exclude');
  const from = kind === 'copy' ? flags.addString('from') : undefined;
  const parents = kind === 'copy' ? flags.addBool('parents') : undefined;
  const checksum = kind === 'add' ? flags.addString('checksum') : undefined;
  if (kind === 'add') flags.addBool('keep-git-dir');
  flags.parse();
  if (node.args.length < 2) {
    throw invalidParameter(
      `${kind.toUpperCase()} requires at least two arguments, but only one was provided. Destination could not be determined`,
    );
  }
  return {
    kind,
    line: node.startLine,
    endLine: node.endLine,
    original: node.original,
    sources: node.args.slice(0, -1).map((word) => {
      const doc = node.heredocs.length > 0 ? parseHeredocWord(word) : undefined;
      return doc ? `<<${doc.name}` : word;
    }),
    dest: node.args[node.args.length - 1] as string,
    heredocs: heredocsOf(node),
    // An empty value is no flag (dockerd tests `!= ""`).
    ...(from?.value ? { from: from.value } : {}),
    ...(chown.value ? { chown: chown.value } : {}),
    ...(chmod.value ? { chmod: chmod.value } : {}),
    ...(checksum?.value ? { checksum: checksum.value } : {}),
    link: link.value === 'true',
    parents: parents?.value === 'true',
    exclude: exclude.values,
  };
}

/** The trigger of ONBUILD as written, with the bodies of its heredocs (so it parses again alone). */
function onbuildExpression(node: ScannedNode, expression: string): string {
  let out = expression;
  for (const h of node.heredocs) out += `\n${h.content}${h.name}`;
  return out;
}

/** A node of a stage (not FROM) → its Instruction; errors as dockerd words them (without the line). */
export function parseInstruction(node: ScannedNode): Instruction {
  const at = { line: node.startLine, endLine: node.endLine, original: node.original };
  switch (node.value) {
    case 'run':
      return parseRun(node);
    case 'copy':
    case 'add':
      return parseCopy(node, node.value);
    case 'arg':
      return { kind: 'arg', ...at, args: parseArgs(node) };
    case 'shell': {
      new BuilderFlags(node.flags).parse();
      if (!node.json) throw invalidParameter('SHELL requires the arguments to be in JSON form');
      if (node.args.length === 0) throw invalidParameter('SHELL requires at least one argument');
      return { kind: 'shell', ...at, shell: node.args };
    }
    case 'maintainer': {
      new BuilderFlags(node.flags).parse();
      if (node.args.length !== 1) throw invalidParameter('MAINTAINER requires exactly one argument');
      return { kind: 'maintainer', ...at, value: node.args[0] as string };
    }
    case 'env':
    case 'label':
    case 'cmd':
    case 'entrypoint':
    case 'expose':
    case 'user':
    case 'workdir':
    case 'stopsignal':
    case 'volume':
    case 'onbuild':
    case 'healthcheck': {
      const c = parseCommand(node);
      if ('cmdLine' in c) return { ...c, ...at, cmdLine: c.cmdLine ?? [] };
      if (c.kind === 'onbuild') return { ...c, ...at, expression: onbuildExpression(node, c.expression) };
      return { ...c, ...at };
    }
    default:
      throw invalidParameter(`unknown instruction: ${node.value.toUpperCase()}`);
  }
}
