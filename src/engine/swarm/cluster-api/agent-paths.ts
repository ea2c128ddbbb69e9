import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AgentLogLine, LogPublishCall } from '../logs/logs.types.js';
import type { AgentApiHandlers, AssignmentMessage, StatusCall } from './assignments.types.js';

/**
 * The cluster API's agent paths, for the node of the verified client certificate:
 * `GET /v1/assignments` (a stream of JSON lines, one message each, until the client goes) and
 * `POST /v1/status` (a batch of task state reports) and `POST /v1/logs/<subscription>` (a batch of
 * task log lines, logs/), and `/v1/attachments` (GET: the node's network attachments; POST: one
 * more; POST `/release`: a container's go: networks/attachment-tasks.ts). Returns false for any other path.
 */
export async function serveAgentPath(
  handlers: AgentApiHandlers,
  node: string,
  req: IncomingMessage,
  res: ServerResponse,
  readBody: (req: IncomingMessage) => Promise<unknown>,
): Promise<boolean> {
  const path = (req.url ?? '').split('?')[0];
  if (req.method === 'GET' && path === '/v1/assignments') {
    const ac = new AbortController();
    res.on('close', () => ac.abort());
    const send = (m: AssignmentMessage) => {
      // the head goes with the first line: a refusal before it is still a plain error answer
      if (!res.headersSent) {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache' });
        res.socket?.setNoDelay(true);
      }
      if (!res.writableEnded) res.write(`${JSON.stringify(m)}\n`);
    };
    await handlers.assignments(node, send, ac.signal);
    if (!res.writableEnded) res.end();
    return true;
  }
  if (req.method === 'POST' && path === '/v1/status') {
    const body = (await readBody(req)) as Partial<StatusCall>;
    const answer = await handlers.status(node, { Updates: Array.isArray(body.Updates) ? body.Updates : [] });
    const data = Buffer.from(JSON.stringify(answer));
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': data.length });
    res.end(data);
    return true;
  }
  if (path === '/v1/attachments' || path === '/v1/attachments/release') {
    let answer: unknown;
    if (req.method === 'GET' && path === '/v1/attachments') answer = await handlers.attachments(node);
    else if (req.method === 'POST' && path === '/v1/attachments') {
      const body = asObject(await readBody(req));
      const address = str(body.Address);
      const address6 = str(body.Address6);
      answer = await handlers.attach(node, {
        ContainerID: str(body.ContainerID),
        Network: str(body.Network),
        Names: Array.isArray(body.Names) ? body.Names.filter((n): n is string => typeof n === 'string') : [],
        ...(address ? { Address: address } : {}),
        ...(address6 ? { Address6: address6 } : {}),
      });
    } else if (req.method === 'POST') {
      const body = asObject(await readBody(req));
      const network = str(body.NetworkID);
      answer = await handlers.release(node, {
        ContainerID: str(body.ContainerID),
        ...(network ? { NetworkID: network } : {}),
      });
    } else return false;
    const data = Buffer.from(JSON.stringify(answer));
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': data.length });
    res.end(data);
    return true;
  }
  const logs = /^\/v1\/logs\/([0-9a-f]{1,64})$/.exec(path ?? '');
  if (req.method === 'POST' && logs) {
    const answer = await handlers.publishLogs(node, logs[1] ?? '', asPublishCall(await readBody(req)));
    const data = Buffer.from(JSON.stringify(answer));
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': data.length });
    res.end(data);
    return true;
  }
  return false;
}

function asObject(body: unknown): { [key: string]: unknown } {
  return body && typeof body === 'object' ? (body as { [key: string]: unknown }) : {};
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** A publish body with what is not a log line left out. */
function asPublishCall(body: unknown): LogPublishCall {
  const o = (body && typeof body === 'object' ? body : {}) as Partial<Record<keyof LogPublishCall, unknown>>;
  const lines = Array.isArray(o.Lines) ? o.Lines : [];
  return {
    Lines: lines.filter(
      (l): l is AgentLogLine =>
        !!l &&
        typeof l === 'object' &&
        typeof (l as AgentLogLine).Task === 'string' &&
        ((l as AgentLogLine).Stream === 'stdout' || (l as AgentLogLine).Stream === 'stderr') &&
        typeof (l as AgentLogLine).Time === 'string' &&
        typeof (l as AgentLogLine).Data === 'string',
    ),
    Done: o.Done === true,
    Errors: Array.isArray(o.Errors) ? o.Errors.filter((e): e is string => typeof e === 'string') : [],
  };
}
