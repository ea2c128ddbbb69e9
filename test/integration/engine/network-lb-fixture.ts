import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type RunResult, runCommand } from '../../helpers/process.js';

/**
 * A stand-in for a swarm node's overlay, for the load-balancing tests: network namespaces only,
 * nothing in the machine's own namespace.
 *
 *   <p>ov     a namespace holding bridge br0: the overlay network (10.254.<n>.0/24)
 *   <p>t1..3  "task" namespaces with eth0 on br0 (.11, .12, .13), each running a server that
 *             answers its own name on TCP 80 and UDP 5353
 *   <p>h      a "host" (the node's namespace), <p>c a client outside it (eth0 10.254.<m>.2,
 *             host's end .1): the ingress tests
 *
 * `attach(nsPath, ip)` plugs another namespace into br0 as the overlay code plugs a task (or the
 * ingress sandbox). `destroy()` kills the servers by pid and deletes every namespace.
 */

const SERVER = `
const net = require('node:net'); const dgram = require('node:dgram');
const name = process.argv[1];
net.createServer((s) => { s.on('error', () => {}); s.end(name); }).listen(80, '0.0.0.0');
const u = dgram.createSocket('udp4');
u.on('message', (m, r) => u.send(name, r.port, r.address));
u.bind(5353, '0.0.0.0', () => console.log('ready'));
`;

/**
 * Sequential requests; prints a JSON array of answers (`ERR <code> <ms>` for failures; a TCP
 * timeout says how far the connection got). TCP waits 10 s of silence: a lost packet is resent by
 * the kernel within that (SYN after 1 s and 3 s), so only a connection that can never complete
 * (no route, no DNAT, a backend that is gone) fails, not a client or server the loaded machine
 * left unscheduled for a few seconds.
 */
const CLIENT = `
const net = require('node:net'); const dgram = require('node:dgram');
const [proto, host, port, count] = process.argv.slice(1);
async function one() {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const fail = (e) => resolve('ERR ' + (e.code || e.message) + ' ' + (Date.now() - t0));
    if (proto === 'tcp') {
      const s = net.connect({ host, port: Number(port) });
      let data = '';
      let phase = 'connecting';
      s.on('connect', () => { phase = 'connected'; });
      s.setTimeout(10000, () => { s.destroy(); resolve('ERR timeout ' + (Date.now() - t0) + ' ' + phase); });
      s.on('data', (d) => { data += d; });
      s.on('end', () => resolve(data));
      s.on('error', fail);
    } else {
      const u = dgram.createSocket('udp4');
      const timer = setTimeout(() => { u.close(); fail(new Error('timeout')); }, 3000);
      u.on('error', (e) => { clearTimeout(timer); u.close(); fail(e); });
      u.on('message', (m) => { clearTimeout(timer); u.close(); resolve(String(m)); });
      u.connect(Number(port), host, () => u.send('x'));
    }
  });
}
// after two timeouts the rest are not tried (a broken path fails in seconds, not minutes)
(async () => {
  const out = [];
  let timeouts = 0;
  for (let i = 0; i < Number(count); i++) {
    const a = timeouts < 2 ? await one() : 'ERR skipped 0';
    if (a.startsWith('ERR timeout')) timeouts++;
    out.push(a);
  }
  console.log(JSON.stringify(out));
})();
`;

async function ip(args: string[]): Promise<void> {
  const r = await runCommand('ip', args);
  if (r.code !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
}

export class LbNetwork {
  readonly tasks: string[] = [];
  private readonly servers: ChildProcess[] = [];
  private ports = 0;

  private constructor(
    readonly prefix: string,
    /** `10.254.<n>`: the overlay's block. */
    readonly overlay: string,
    /** `10.254.<n+1>`: the host–client block. */
    readonly outside: string,
  ) {}

  static async create(tasks = 3): Promise<LbNetwork> {
    const n = 2 * (1 + ((randomBytes(1)[0] ?? 0) % 100));
    const net = new LbNetwork(`bl${randomBytes(3).toString('hex')}`, `10.254.${n}`, `10.254.${n + 1}`);
    try {
      await ip(['netns', 'add', net.ns('ov')]);
      await ip(['-n', net.ns('ov'), 'link', 'add', 'br0', 'type', 'bridge']);
      await ip(['-n', net.ns('ov'), 'link', 'set', 'br0', 'up']);
      for (let i = 1; i <= tasks; i++) {
        const t = net.ns(`t${i}`);
        await ip(['netns', 'add', t]);
        net.tasks.push(t);
        await ip(['-n', t, 'link', 'set', 'lo', 'up']);
        await net.attach(net.path(t), net.taskIp(i));
        await net.serve(t, `t${i}`);
      }
      const h = net.ns('h');
      const c = net.ns('c');
      await ip(['netns', 'add', h]);
      await ip(['netns', 'add', c]);
      await ip(['-n', h, 'link', 'set', 'lo', 'up']);
      await ip(['-n', c, 'link', 'set', 'lo', 'up']);
      await ip(['-n', h, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', c]);
      await ip(['-n', h, 'addr', 'add', `${net.outside}.1/24`, 'dev', 'eth0']);
      await ip(['-n', c, 'addr', 'add', `${net.outside}.2/24`, 'dev', 'eth0']);
      await ip(['-n', h, 'link', 'set', 'eth0', 'up']);
      await ip(['-n', c, 'link', 'set', 'eth0', 'up']);
      await ip(['-n', c, 'route', 'add', 'default', 'via', `${net.outside}.1`]);
      // the host routes between its outside and the sandbox (a node with bridges has it on)
      const f = await net.exec(h, ['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
      if (f.code !== 0) throw new Error(`ip_forward: ${f.stderr}`);
    } catch (err) {
      await net.destroy();
      throw err;
    }
    return net;
  }

  /** The pid of the server in task `i` (a process in its namespace: `/proc/<pid>/ns/net`). */
  serverPid(i: number): number {
    const pid = this.servers[i - 1]?.pid;
    if (!pid) throw new Error(`no server in task ${i}`);
    return pid;
  }

  ns(suffix: string): string {
    return `${this.prefix}${suffix}`;
  }

  path(ns: string): string {
    return `/run/netns/${ns}`;
  }

  get host(): string {
    return this.ns('h');
  }

  get client(): string {
    return this.ns('c');
  }

  taskIp(i: number): string {
    return `${this.overlay}.${10 + i}`;
  }

  /** Plug the namespace at `nsPath` into the overlay bridge with `ip`/24 (its eth1 when `name`). */
  async attach(nsPath: string, address: string, name = 'eth0'): Promise<void> {
    const port = `p${++this.ports}`;
    await ip([
      '-n',
      this.ns('ov'),
      'link',
      'add',
      port,
      'type',
      'veth',
      'peer',
      'name',
      name,
      'netns',
      nsPath,
    ]);
    await ip(['-n', this.ns('ov'), 'link', 'set', port, 'master', 'br0', 'up']);
    const inNs = ['nsenter', `--net=${nsPath}`, 'ip'];
    for (const args of [
      ['addr', 'add', `${address}/24`, 'dev', name],
      ['link', 'set', name, 'up'],
    ]) {
      const r = await runCommand(inNs[0] ?? '', [...inNs.slice(1), ...args]);
      if (r.code !== 0) throw new Error(`ip ${args.join(' ')} in ${nsPath}: ${r.stderr}`);
    }
  }

  private async serve(ns: string, name: string): Promise<void> {
    const child = spawn('nsenter', [`--net=${this.path(ns)}`, process.execPath, '-e', SERVER, name], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.servers.push(child);
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    for (let i = 0; i < 100 && !out.includes('ready'); i++) {
      if (child.exitCode !== null) throw new Error(`server ${name} exited ${child.exitCode}`);
      await sleep(50);
    }
    if (!out.includes('ready')) throw new Error(`server ${name} did not start`);
  }

  exec(ns: string, cmd: string[]): Promise<RunResult> {
    return runCommand('nsenter', [`--net=${this.path(ns)}`, ...cmd], { timeoutMs: 20_000 });
  }

  /** `count` sequential requests from namespace `ns`: each answer (a task's name) or `ERR ...`. */
  async requests(
    ns: string,
    proto: 'tcp' | 'udp',
    host: string,
    port: number,
    count: number,
  ): Promise<string[]> {
    const r = await this.exec(ns, [process.execPath, '-e', CLIENT, proto, host, String(port), String(count)]);
    if (r.code !== 0) throw new Error(`client: ${r.stderr}`);
    return JSON.parse(r.stdout) as string[];
  }

  async destroy(): Promise<void> {
    for (const s of this.servers) if (s.exitCode === null && s.pid) process.kill(s.pid, 'SIGKILL');
    for (const ns of [...this.tasks, this.ns('ov'), this.ns('h'), this.ns('c')])
      await runCommand('ip', ['netns', 'del', ns]);
  }
}

/** How many answers each name got. */
export function tally(answers: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of answers) out[a] = (out[a] ?? 0) + 1;
  return out;
}
