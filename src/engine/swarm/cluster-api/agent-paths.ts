import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AgentApiHandlers, AssignmentMessage, StatusCall } from './assignments.types.js';

/**
 * The cluster API's agent paths, for the node of the verified client certificate:
 * `GET /v1/assignments` (a stream of JSON lines, one message each, until the client goes) and
 * `POST /v1/status` (a batch of task state reports). Returns false for any other path.
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
  return false;
}
