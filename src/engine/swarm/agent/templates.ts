import { executeGoTemplate, type GoFunc, GoMap, type GoStruct } from './go-template.js';

/**
 * swarmkit's templates (its template/context.go), expanded per task on its node with Go's
 * text/template rules (go-template.ts): the placeholders `{{.Service.ID}}`, `{{.Service.Name}}`,
 * `{{.Service.Labels}}` (Go's map print), `{{index .Service.Labels "k"}}`, `{{.Node.ID}}`,
 * `{{.Node.Hostname}}`, `{{.Node.Platform.OS}}`, `{{.Node.Platform.Architecture}}`,
 * `{{.Task.ID}}`, `{{.Task.Name}}`, `{{.Task.Slot}}` (the node's ID for a task without a slot) in a
 * task's Hostname, Env and mount sources and targets; and in the data of a secret or config
 * created with `Templating {Name: "golang"}`, also `{{env "X"}}`, `{{secret "target"}}`,
 * `{{config "target"}}` and swarmkit's `{{join sep a b…}}`.
 */

export interface TemplateContext {
  Service: { ID: string; Name: string; Labels: Record<string, string> };
  Node: { ID: string; Hostname: string; Platform: { OS: string; Architecture: string } };
  Task: { ID: string; Name: string; Slot: string };
}

/** The functions a payload template calls besides Go's builtins. */
export interface PayloadFunctions {
  /** The value of a variable of the task's container Env ('' when unset). */
  env(name: string): string;
  /** The data of the task's secret with this target name; throws when the task has none. */
  secret(target: string): string;
  config(target: string): string;
}

/** The context as Go's template sees it (field order as swarmkit's struct, for a struct print). */
function dot(ctx: TemplateContext): GoStruct {
  return {
    Service: { ID: ctx.Service.ID, Name: ctx.Service.Name, Labels: new GoMap(ctx.Service.Labels) },
    Node: {
      ID: ctx.Node.ID,
      Hostname: ctx.Node.Hostname,
      Platform: { Architecture: ctx.Node.Platform.Architecture, OS: ctx.Node.Platform.OS },
    },
    Task: { ID: ctx.Task.ID, Name: ctx.Task.Name, Slot: ctx.Task.Slot },
  };
}

/** swarmkit's own function: `join sep a b…`. */
const join: GoFunc = (...args) => {
  if (args.length === 0) throw new Error('wrong number of args for join: want at least 1 got 0');
  const strs = args.map((a) => {
    if (typeof a !== 'string') throw new Error('wrong type for value; expected string');
    return a;
  });
  return strs.slice(1).join(strs[0]);
};

function stringArg(name: string, f: (s: string) => string): GoFunc {
  return (...args) => {
    if (args.length !== 1) throw new Error(`wrong number of args for ${name}: want 1 got ${args.length}`);
    const [a] = args;
    if (typeof a !== 'string') throw new Error('wrong type for value; expected string');
    return f(a);
  };
}

/** `text` with its placeholders expanded (a spec field); a bad template fails (the task is rejected). */
export function expandTemplate(text: string, ctx: TemplateContext): string {
  if (!text.includes('{{')) return text;
  return executeGoTemplate(text, dot(ctx), { join });
}

/** A templated secret's or config's data for one task. */
export function expandPayload(text: string, ctx: TemplateContext, fns: PayloadFunctions): string {
  return executeGoTemplate(text, dot(ctx), {
    join,
    env: stringArg('env', (s) => fns.env(s)),
    secret: stringArg('secret', (s) => fns.secret(s)),
    config: stringArg('config', (s) => fns.config(s)),
  });
}
