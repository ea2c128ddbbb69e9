import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { busyboxTarball } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import { startAll } from '../../helpers/start-all.js';

/**
 * Image events (import, tag, untag, delete, prune; commit's in commit.test.ts) and POST
 * /images/prune with its filters, the same steps on berth and dockerd 20.10: the events (Type,
 * Action, Actor.ID and Attributes: name and labels), what prune deleted and what is left.
 */

interface Side {
  ok(args: string[]): Promise<string>;
  events(since: number): Promise<string>;
}

/** Image IDs to the names given them (others, layers, to `<layer>`), so that two engines' outputs compare. */
function naming(ids: Map<string, string>): (text: string) => string {
  return (text) => text.replace(/sha256:[0-9a-f]{64}/g, (m) => ids.get(m) ?? '<layer>');
}

/** Lines sorted: dockerd prunes (and logs) in its map's order, which is random. */
const sortedLines = (text: string) => text.split('\n').sort();

async function scenario(side: Side, tar: string): Promise<Record<string, unknown>> {
  const since = Math.floor(Date.now() / 1000) - 1;
  const out: Record<string, unknown> = {};
  const ids = new Map<string, string>();
  const name = naming(ids);
  const images = async () =>
    (await side.ok(['images', '--format', '{{.Repository}}:{{.Tag}}'])).split('\n').sort();
  const prune = async (args: string[]) => sortedLines(name(await side.ok(['image', 'prune', '-f', ...args])));
  await side.ok(['import', '--change', 'CMD ["sh"]', tar, 'busybox']);
  ids.set(await side.ok(['import', '--change', 'LABEL x=1', '--change', 'CMD ["sh"]', tar, 'imp:1']), 'imp');
  await side.ok(['tag', 'imp:1', 'imp:2']);
  await side.ok(['tag', 'imp:1', 'other/imp']);
  await side.ok(['rmi', 'imp:2']);
  await side.ok(['rmi', '-f', 'imp:1', 'other/imp']);
  ids.set(await side.ok(['import', '--change', 'LABEL y=2', tar]), 'dangling');
  await side.ok(['import', '--change', 'LABEL keep=yes', tar, 'keep:1']);
  await side.ok(['import', '--change', 'LABEL keep=no', tar, 'drop:1']);
  await side.ok(['import', '--change', 'LABEL keep=no', '--change', 'ENV A=1', tar, 'used:1']);
  await side.ok(['create', '--name', 'u1', 'used:1', 'true']);
  await side.ok(['run', '--name', 'u2', 'busybox', 'sh', '-c', 'echo > /f']);
  await side.ok(['commit', 'u2', 'child:1']);
  for (const ref of ['busybox', 'keep:1', 'drop:1', 'used:1', 'child:1']) {
    ids.set(await side.ok(['image', 'inspect', '-f', '{{.Id}}', ref]), ref);
  }
  out.danglingByLabel = await prune(['--filter', 'label=y=2']);
  out.until = await prune(['-a', '--filter', 'label!=keep=yes', '--filter', 'until=24h']);
  out.none = await prune(['--filter', 'label=nope']);
  out.notKeep = await prune(['-a', '--filter', 'label!=keep=yes']);
  out.left = await images();
  out.all = await prune(['-a']);
  out.leftAfterAll = await images();
  await side.ok(['rm', '-f', 'u1', 'u2']);
  const events = (await side.events(since))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((e) => e.Type === 'image')
    .map((e) => ({ Type: e.Type, Action: e.Action, Actor: e.Actor }));
  const named = events.map((e) => name(JSON.stringify(e)));
  // in order up to the last tag (commit's), then prune's deletions in no set order
  const split = named.findIndex((e) => e.includes('"name":"child:1"')) + 1;
  out.events = named.slice(0, split);
  out.pruneEvents = named.slice(split).sort();
  return out;
}

describe('image events and prune: berth as dockerd 20.10', () => {
  let berth: TestEngine;
  let dockerd: ReferenceDockerd;

  before(async () => {
    [berth, dockerd] = await startAll([TestEngine.start(), ReferenceDockerd.start()]);
  });
  after(async () => {
    await Promise.all([berth?.destroy(), dockerd?.destroy()]);
  });

  it('gives the same events and prunes the same images', async () => {
    const tar = await busyboxTarball();
    const until = () => String(Math.floor(Date.now() / 1000) + 1);
    const eventArgs = (since: number) => [
      'events',
      '--since',
      String(since),
      '--until',
      until(),
      '--format',
      '{{json .}}',
    ];
    const [b, d] = await Promise.all([
      scenario(
        {
          ok: (a) => berth.dockerOk(a, { timeoutMs: 60_000 }),
          events: (since) => berth.dockerOk(eventArgs(since)),
        },
        tar,
      ),
      scenario(
        {
          ok: (a) => dockerd.dockerOk(a, { timeoutMs: 60_000, cli: 'docker' }),
          events: (since) => dockerd.dockerOk(eventArgs(since), { cli: 'docker' }),
        },
        tar,
      ),
    ]);
    assert.ok(b && d);
    assert.ok((d.events as string[]).length >= 10 && (d.pruneEvents as string[]).length >= 10);
    for (const k of Object.keys(d)) assert.deepEqual(b[k], d[k], `${k} differs`);
  });
});
