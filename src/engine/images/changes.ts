import type { ContainerConfig } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import { parseSignal } from '../../common/signals.js';
import { cleanPath } from './dockerfile/go-text.js';
import { parseCommand } from './dockerfile/instructions.js';
import { parsePortSpec } from './dockerfile/port-spec.js';
import { parseDockerfile } from './dockerfile/scan.js';
import { processWord, processWords } from './dockerfile/shell-words.js';

/**
 * `changes` of import and commit: Dockerfile instructions applied to an image config, as
 * dockerd 20.10's BuildFromConfig does it. The steps and their order are dockerd's, and so
 * are the error texts (all InvalidParameter):
 *
 * 1. the changes are joined with newlines and parsed as a Dockerfile (buildkit's parser: parser
 *    directives, comments, line continuations, per-instruction argument parsers, JSON forms);
 * 2. every instruction must be one of CMD, ENTRYPOINT, ENV, EXPOSE, HEALTHCHECK, LABEL, ONBUILD,
 *    USER, VOLUME, WORKDIR (`<name> is not a valid change command`);
 * 3. every instruction is turned into a command (argument counts, builder flags);
 * 4. the commands are applied in order, each expanding variables (`$VAR`, `${VAR:-x}`, quotes)
 *    against the environment the config has at that point.
 *
 * No changes at all leave the config as it is; an empty change is a Dockerfile without
 * instructions, an error.
 */

const VALID_CHANGE_COMMANDS = new Set([
  'cmd',
  'entrypoint',
  'env',
  'expose',
  'healthcheck',
  'label',
  'onbuild',
  // not in dockerd 20.10; newer dockerd takes it (docker CLI 28 documents it for import and commit)
  'stopsignal',
  'user',
  'volume',
  'workdir',
]);

const DEFAULT_SHELL = ['/bin/sh', '-c'];

/** Apply Dockerfile-like changes to a copy of `base`. Errors are InvalidParameter with dockerd's wording. */
export function applyChanges(base: ContainerConfig, changes: string[]): ContainerConfig {
  const config: ContainerConfig = structuredClone(base);
  if (changes.length === 0) return config;
  const { nodes, escapeToken } = parseDockerfile(changes.join('\n'));
  for (const node of nodes) {
    if (!VALID_CHANGE_COMMANDS.has(node.value)) {
      throw invalidParameter(`${node.value} is not a valid change command`);
    }
  }
  const commands = nodes.map(parseCommand);
  let cmdSet = false;
  for (const command of commands) {
    const env = config.Env;
    const expand = (word: string) => processWord(word, env, escapeToken);
    switch (command.kind) {
      case 'env': {
        const list = [...(config.Env ?? [])];
        const index = new Map<string, number>();
        list.forEach((e, i) => {
          const eq = e.indexOf('=');
          const key = eq < 0 ? e : e.slice(0, eq);
          if (!index.has(key)) index.set(key, i);
        });
        const pairs = command.pairs.map(([k, v]): [string, string] => [expand(k), expand(v)]);
        for (const [k, v] of pairs) {
          const i = index.get(k);
          if (i !== undefined) list[i] = `${k}=${v}`;
          else {
            index.set(k, list.length);
            list.push(`${k}=${v}`);
          }
        }
        config.Env = list;
        break;
      }
      case 'label': {
        const pairs = command.pairs.map(([k, v]): [string, string] => [expand(k), expand(v)]);
        const labels = { ...(config.Labels ?? {}) };
        for (const [k, v] of pairs) labels[k] = v;
        config.Labels = labels;
        break;
      }
      case 'cmd':
      case 'entrypoint': {
        let line = command.cmdLine;
        if (command.prependShell && line !== null) {
          line = [...(config.Shell?.length ? config.Shell : DEFAULT_SHELL), ...line];
        }
        delete config.ArgsEscaped;
        if (command.kind === 'cmd') {
          config.Cmd = line;
          if ((command.cmdLine ?? []).length !== 0) cmdSet = true;
        } else {
          config.Entrypoint = line;
          if (!cmdSet) config.Cmd = null;
        }
        break;
      }
      case 'expose': {
        const words = command.ports.flatMap((p) => processWords(p, env, escapeToken));
        const exposed = words.flatMap(parsePortSpec);
        if (exposed.length > 0 || config.ExposedPorts) {
          const ports = { ...(config.ExposedPorts ?? {}) };
          for (const p of exposed) ports[p] = {};
          config.ExposedPorts = ports;
        }
        break;
      }
      case 'user': {
        config.User = expand(command.value);
        break;
      }
      case 'stopsignal': {
        const signal = expand(command.value);
        parseSignal(signal);
        config.StopSignal = signal;
        break;
      }
      case 'workdir': {
        const dir = expand(command.value);
        if (dir === '') throw invalidParameter('cannot normalize nothing');
        config.WorkingDir = dir.startsWith('/')
          ? dir
          : cleanPath(['/', config.WorkingDir ?? '', dir].filter((p) => p !== '').join('/'));
        break;
      }
      case 'volume': {
        const volumes = command.volumes.map(expand);
        const map = { ...(config.Volumes ?? {}) };
        for (const v of volumes) {
          if (v === '') throw invalidParameter('VOLUME specified can not be an empty string');
          map[v] = {};
        }
        config.Volumes = map;
        break;
      }
      case 'onbuild': {
        config.OnBuild = [...(config.OnBuild ?? []), command.expression];
        break;
      }
      case 'healthcheck': {
        config.Healthcheck = command.health;
        break;
      }
    }
  }
  return config;
}

export { goQuote, parseGoDuration } from './dockerfile/go-text.js';
export { jsonForm } from './dockerfile/parser.js';
export { parseDockerfile } from './dockerfile/scan.js';
export { processWord, processWords } from './dockerfile/shell-words.js';
