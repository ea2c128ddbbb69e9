import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { EtcdMemberSpec } from '../../src/engine/swarm/etcd/etcd-args.js';
import { testSupervisor } from './swarm-etcd.js';

/** A supervising process for TestEtcd: starts the member of `<dir>/spec.json`, prints its pid, waits. */
const dir = process.argv[2] ?? '';
const spec = JSON.parse(await readFile(join(dir, 'spec.json'), 'utf8')) as EtcdMemberSpec;
const supervisor = testSupervisor(dir);
await supervisor.start(spec);
process.stdout.write(`ready ${supervisor.memberPid}\n`);
setInterval(() => {}, 1 << 30);
