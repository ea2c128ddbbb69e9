import { invalidParameter } from '../../../common/errors.js';

/**
 * swarmkit's placeholders in a task's Hostname, Env and mount sources and targets, expanded per
 * task on its node: `{{.Service.ID}}`, `{{.Service.Name}}`, `{{.Service.Labels}}` (Go's map
 * print), `{{index .Service.Labels "k"}}`, `{{.Node.ID}}`, `{{.Node.Hostname}}`,
 * `{{.Node.Platform.OS}}`, `{{.Node.Platform.Architecture}}`, `{{.Task.ID}}`, `{{.Task.Name}}`,
 * `{{.Task.Slot}}` (the node's ID for a task without a slot, as swarmkit).
 */

export interface TemplateContext {
  Service: { ID: string; Name: string; Labels: Record<string, string> };
  Node: { ID: string; Hostname: string; Platform: { OS: string; Architecture: string } };
  Task: { ID: string; Name: string; Slot: string };
}

/** Go's `fmt.Print` of a map[string]string: `map[a:1 b:2]`, keys sorted. */
function goMap(m: Record<string, string>): string {
  const entries = Object.keys(m)
    .sort()
    .map((k) => `${k}:${m[k]}`);
  return `map[${entries.join(' ')}]`;
}

function field(ctx: TemplateContext, path: string): string {
  switch (path) {
    case '.Service.ID':
      return ctx.Service.ID;
    case '.Service.Name':
      return ctx.Service.Name;
    case '.Service.Labels':
      return goMap(ctx.Service.Labels);
    case '.Node.ID':
      return ctx.Node.ID;
    case '.Node.Hostname':
      return ctx.Node.Hostname;
    case '.Node.Platform.OS':
      return ctx.Node.Platform.OS;
    case '.Node.Platform.Architecture':
      return ctx.Node.Platform.Architecture;
    case '.Task.ID':
      return ctx.Task.ID;
    case '.Task.Name':
      return ctx.Task.Name;
    case '.Task.Slot':
      return ctx.Task.Slot;
    default:
      throw invalidParameter(`template: can't evaluate field ${path.slice(1)}`);
  }
}

const ACTION = /\{\{-?\s*(.*?)\s*-?\}\}/g;

/** `text` with its placeholders expanded; an unknown one fails (the task is rejected). */
export function expandTemplate(text: string, ctx: TemplateContext): string {
  if (!text.includes('{{')) return text;
  return text.replace(ACTION, (_all, body: string) => {
    const index = /^index\s+\.Service\.Labels\s+"([^"]*)"$/.exec(body);
    if (index) return ctx.Service.Labels[index[1] ?? ''] ?? '';
    if (/^\.[A-Za-z.]+$/.test(body)) return field(ctx, body);
    throw invalidParameter(`template: unsupported action {{${body}}}`);
  });
}
