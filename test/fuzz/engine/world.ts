import { ensureBusybox } from '../../helpers/busybox.js';
import type { TestEngine } from '../../helpers/engine.js';

/**
 * What the engine fuzzer's requests name: fixture containers in each state, a volume, an exec, the
 * busybox image, and IDs learned from answers. Fixtures are put back at fixed request indices when
 * a request removed or renamed them, and containers the fuzzer made are removed from time to time
 * (and all of them at the end, with the engine).
 */

interface CreateAnswer {
  Id: string;
}

export const FIXTURES = {
  created: { Image: 'busybox', Cmd: ['true'] },
  running: { Image: 'busybox', Cmd: ['sleep', '100000'], StopTimeout: 1 },
  tty: { Image: 'busybox', Cmd: ['sh'], Tty: true, OpenStdin: true, StopTimeout: 1 },
  exited: { Image: 'busybox', Cmd: ['sh', '-c', 'echo out; echo err >&2'] },
} as const;

type FixtureName = keyof typeof FIXTURES;

const STARTED: FixtureName[] = ['running', 'tty', 'exited'];
/** How many containers the fuzzer may have made before the oldest are removed. */
const KEEP_LEARNED = 30;
/** Fixtures are checked before every MAINTAIN_EVERY-th request. */
export const MAINTAIN_EVERY = 100;

export class EngineWorld {
  /** Container names and IDs of the fixtures. */
  readonly containers: string[] = [];
  readonly execs: string[] = [];
  readonly volumes: string[] = ['fz-vol'];
  readonly images: string[] = ['busybox', 'busybox:latest', 'docker.io/library/busybox:latest'];
  /** IDs of containers the fuzzer made (newest last). */
  readonly learnedContainers: string[] = [];
  readonly learnedExecs: string[] = [];

  constructor(private readonly engine: TestEngine) {}

  private async ok(method: string, path: string, body?: unknown, alsoOk: number[] = []): Promise<string> {
    const r = await this.engine.request(method, path, body === undefined ? {} : { body, timeoutMs: 60_000 });
    if (r.status >= 300 && !alsoOk.includes(r.status))
      throw new Error(`setup: ${method} ${path}: ${r.status} ${r.text()}`);
    return r.text();
  }

  private async exists(path: string): Promise<boolean> {
    const r = await this.engine.request('GET', path, { timeoutMs: 60_000 });
    return r.status === 200;
  }

  async setup(): Promise<void> {
    const imageId = await ensureBusybox(this.engine);
    this.images.push(imageId, imageId.replace(/^sha256:/, '').slice(0, 12));
    await this.ensureFixtures();
  }

  private async ensureFixtures(): Promise<void> {
    if (!(await this.exists('/images/busybox:latest/json'))) await ensureBusybox(this.engine);
    // the names and IDs of the fixtures as they are now (a removed one's ID is gone with it)
    const refs: string[] = [];
    for (const name of Object.keys(FIXTURES) as FixtureName[]) {
      const full = `fz-${name}`;
      const r = await this.engine.request('GET', `/containers/${full}/json`, { timeoutMs: 60_000 });
      let id: string;
      let running = false;
      if (r.status === 200) {
        const info = r.json<{ Id: string; State: { Running: boolean; Paused: boolean } }>();
        id = info.Id;
        running = info.State.Running;
        if (info.State.Paused) await this.ok('POST', `/containers/${full}/unpause`);
      } else {
        id = (
          JSON.parse(await this.ok('POST', `/containers/create?name=${full}`, FIXTURES[name])) as CreateAnswer
        ).Id;
      }
      // 304: started meanwhile (a restart the fuzzer cut off still finishes in the engine, as in dockerd)
      if (STARTED.includes(name) && !running && name !== 'exited')
        await this.ok('POST', `/containers/${full}/start`, undefined, [304]);
      if (name === 'exited' && r.status !== 200) await this.ok('POST', `/containers/${full}/start`);
      refs.push(full, id, id.slice(0, 12));
    }
    this.containers.splice(0, this.containers.length, ...refs);
    if (!(await this.exists('/volumes/fz-vol'))) await this.ok('POST', '/volumes/create', { Name: 'fz-vol' });
    const exec = JSON.parse(
      await this.ok('POST', '/containers/fz-running/exec', { Cmd: ['true'] }),
    ) as CreateAnswer;
    this.execs.splice(0, this.execs.length, exec.Id);
  }

  /** Before request `index`: fixtures back, the oldest learned containers removed. */
  async maintain(index: number): Promise<void> {
    if (index === 0 || index % MAINTAIN_EVERY !== 0) return;
    await this.ensureFixtures();
    while (this.learnedContainers.length > KEEP_LEARNED) {
      const id = this.learnedContainers.shift() as string;
      await this.engine.request('DELETE', `/containers/${id}?force=1`, { timeoutMs: 60_000 });
    }
    this.learnedExecs.splice(0, Math.max(0, this.learnedExecs.length - KEEP_LEARNED));
  }

  learnContainer(id: string): void {
    this.learnedContainers.push(id);
  }

  learnExec(id: string): void {
    this.learnedExecs.push(id);
  }
}
