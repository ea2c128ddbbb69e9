import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TestEngine } from '../helpers/engine.js';
import { CORPUS } from './corpus.js';
import { EngineFuzzer } from './engine/generate.js';
import { engineRoutes, queryParamsOf } from './engine/routes.js';
import {
  createBodyProblem,
  execBodyProblem,
  remoteRegistryProblem,
  updateBodyProblem,
  volumeBodyProblem,
} from './engine/safety.js';
import { EngineWorld } from './engine/world.js';
import { KNOWN_DEFECTS } from './known.js';
import type { ExchangeResult } from './lib/exchange.js';
import { ResponseParser } from './lib/response-parser.js';
import { Rng } from './lib/rng.js';
import { judge } from './lib/verdict.js';
import type { WireRequest } from './lib/wire.js';
import { RegistryFuzzer, registryRoutes } from './registry/generate.js';
import { RegistryWorld } from './registry/world.js';

/** The fuzz harness itself: generators, parser, verdict, safety rules (no server needed). */

const b = (s: string) => Buffer.from(s);

function parse(text: string, methods = ['GET']): ResponseParser {
  const p = new ResponseParser(methods);
  // in pieces, as a socket delivers
  for (let i = 0; i < text.length; i += 7) p.push(Buffer.from(text.slice(i, i + 7), 'latin1'));
  return p;
}

function request(over: Partial<WireRequest> = {}): WireRequest {
  return {
    data: b('GET / HTTP/1.1\r\n\r\n'),
    methods: ['GET'],
    halfClose: false,
    mayClose: false,
    streaming: false,
    mayBlock: false,
    label: 't',
    ...over,
  };
}

function result(text: string, over: Partial<ExchangeResult> = {}): ExchangeResult {
  const p = parse(text);
  if (over.closed) p.end();
  return {
    responses: p.responses,
    parseError: p.error,
    closed: false,
    timedOut: false,
    unsent: false,
    upgraded: p.upgraded,
    elapsedMs: 1,
    received: Buffer.from(text),
    ...over,
  };
}

const never = () => false;

describe('fuzz harness', () => {
  it('draws the same request for the same seed and index, whatever came before', async () => {
    const world = () => {
      const w = new EngineWorld({} as TestEngine);
      w.containers.push('fz-created', 'fz-running');
      w.execs.push('e1');
      return w;
    };
    const routes = await engineRoutes();
    const a = new EngineFuzzer(routes, world());
    const c = new EngineFuzzer(routes, world());
    for (let i = 0; i < 300; i++) a.generate(new Rng(7, i), i);
    for (const i of [0, 5, 299])
      assert.deepEqual(a.generate(new Rng(7, i), i).data, c.generate(new Rng(7, i), i).data);
    assert.notDeepEqual(a.generate(new Rng(7, 1), 1).data, a.generate(new Rng(8, 1), 1).data);
    const r = new RegistryFuzzer(registryRoutes(), new RegistryWorld('http://127.0.0.1:1'));
    const r2 = new RegistryFuzzer(registryRoutes(), new RegistryWorld('http://127.0.0.1:1'));
    assert.deepEqual(r.generate(new Rng(3, 9), 9).data, r2.generate(new Rng(3, 9), 9).data);
  });

  it("reads the engine's routes from its tables, and the registry's from routes.ts", async () => {
    const routes = await engineRoutes();
    const keys = routes.map((r) => `${r.method} ${r.template}`);
    for (const k of [
      'POST /containers/create',
      'GET /events',
      'PUT /containers/{name}/archive',
      'GET /_ping',
    ])
      assert.ok(keys.includes(k), k);
    assert.deepEqual(
      queryParamsOf("x.get('a'); q.getAll('b'); bool(ctx, 'c'); parseIntParam(ctx.query, 'd')"),
      ['a', 'b', 'c', 'd'],
    );
    const reg = registryRoutes();
    assert.deepEqual(reg.find((r) => r.name === 'manifest')?.methods.sort(), [
      'DELETE',
      'GET',
      'HEAD',
      'PUT',
    ]);
  });

  it('parses responses strictly: framing, HEAD, interim answers, upgrades, garbage', () => {
    const ok = parse('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK');
    assert.equal(ok.completeCount, 1);
    const chunked = parse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nOK\r\n0\r\n\r\n');
    assert.equal(chunked.responses[0]?.body.toString(), 'OK');
    assert.equal(chunked.completeCount, 1);
    assert.equal(parse('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n', ['HEAD']).completeCount, 1);
    // a handler's 400 to a HEAD (it has a Date) has no body; a raw refusal of an unparsed request has one
    const refusal = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 2\r\n';
    assert.equal(parse(`${refusal}Date: x\r\n\r\n`, ['HEAD']).completeCount, 1);
    assert.equal(parse(`${refusal}\r\n`, ['HEAD']).completeCount, 0);
    assert.equal(parse(`${refusal}\r\n{}`, ['HEAD']).completeCount, 1);
    const cont = parse('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n');
    assert.equal(cont.completeCount, 1);
    assert.equal(parse('HTTP/1.1 101 Switching Protocols\r\n\r\n\u0001\u0000garbage').upgraded, true);
    assert.match(
      parse('HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n').error ?? '',
      /Content-Length/,
    );
    assert.match(parse('HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n').error ?? '', /header/);
    assert.match(parse('SSH-2.0-OpenSSH\r\n').error ?? '', /status line/);
    assert.match(parse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n').error ?? '', /chunk/);
    const closeFramed = parse('HTTP/1.1 200 OK\r\n\r\nbody');
    assert.equal(closeFramed.completeCount, 0);
    closeFramed.end();
    assert.equal(closeFramed.completeCount, 1);
  });

  it('fails a 500, a hang, a reset without an answer and a cut answer; passes 501 and unfinished requests', () => {
    const deliberate = (res: { status: number }) => res.status === 501;
    const fiveHundred = judge(request(), result('HTTP/1.1 500 x\r\nContent-Length: 0\r\n\r\n'), deliberate);
    assert.match(fiveHundred ?? '', /^500/);
    assert.equal(
      judge(request(), result('HTTP/1.1 501 x\r\nContent-Length: 0\r\n\r\n'), deliberate),
      undefined,
    );
    assert.match(judge(request(), result('', { timedOut: true }), never) ?? '', /no answer within/);
    assert.equal(judge(request({ mayBlock: true }), result('', { timedOut: true }), never), undefined);
    assert.match(
      judge(request(), result('', { closed: true, socketError: 'ECONNRESET' }), never) ?? '',
      /reset/,
    );
    assert.equal(judge(request({ mayClose: true }), result('', { closed: true }), never), undefined);
    const cut = result('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc', { closed: true });
    assert.match(judge(request(), cut, never) ?? '', /middle of the answer/);
    assert.equal(judge(request({ streaming: true }), cut, never), undefined);
    assert.match(judge(request(), result('NOT HTTP AT ALL\r\n\r\n'), never) ?? '', /not valid HTTP/);
  });

  it('never sends a pull, push, search or inspect to a registry off this machine', async () => {
    for (const far of [
      'example.com/x',
      'registry.example:5000/a/b',
      'localhost.evil/x',
      '10.0.0.1:5000/x',
      '[2001:db8::1]:5000/x',
    ])
      assert.ok(remoteRegistryProblem(far), far);
    for (const near of [
      'busybox',
      'fz/imp:1',
      'docker.io/library/busybox',
      'localhost:5000/fz',
      '127.0.0.1:1/x',
      '[::1]:5000/x',
      '',
      undefined,
    ])
      assert.equal(remoteRegistryProblem(near), undefined, String(near));
    const w = new EngineWorld({} as TestEngine);
    w.containers.push('fz-created', 'fz-running');
    const fuzzer = new EngineFuzzer(await engineRoutes(), w);
    for (let i = 0; i < 3000; i++) {
      const text = fuzzer.generate(new Rng(77, i), i).data.toString('latin1');
      const target = text.slice(0, text.indexOf('\r\n'));
      const q = /[?&](?:fromImage|term)=([^&\s]*)/.exec(target);
      if (q) {
        let v: string | undefined;
        try {
          v = decodeURIComponent(q[1] ?? '');
        } catch {
          v = undefined;
        }
        assert.equal(remoteRegistryProblem(v), undefined, target);
      }
    }
  });

  it('never lets a body reach the host: binds, privileges, host namespaces, devices, volume mounts', () => {
    const unsafe = [
      '{"Image":"busybox","HostConfig":{"Binds":["/:/host"]}}',
      '{"Image":"busybox","Binds":["/etc:/x:ro"]}',
      '{"Image":"busybox","HostConfig":{"Privileged":true}}',
      '{"Image":"busybox","privileged":true}',
      '{"Image":"busybox","HostConfig":{"Mounts":[{"Type":"bind","Source":"/","Target":"/h"}]}}',
      '{"Image":"busybox","HostConfig":{"Mounts":[{"Type":"volume","Target":"/h","VolumeOptions":{"DriverConfig":{"Options":{"type":"none","o":"bind","device":"/"}}}}]}}',
      '{"Image":"busybox","HostConfig":{"NetworkMode":"host"}}',
      '{"Image":"busybox","PidMode":" HOST "}',
      '{"Image":"busybox","HostConfig":{"Devices":[{"PathOnHost":"/dev/sda"}]}}',
      '{"Image":"busybox","HostConfig":{"CapAdd":["SYS_ADMIN"]}}',
      '{"Image":"busybox","HostConfig":{"MaskedPaths":[]}}',
      '{"Image":"busybox","HostConfig":{"CgroupParent":"/../.."}}',
      '{"Image":"busybox","StopTimeout":3600}',
    ];
    for (const body of unsafe) assert.ok(createBodyProblem(b(body), '1.56'), body);
    for (const body of [
      '{"Image":"busybox","HostConfig":{"Binds":["fz-vol:/data","/anon"],"NetworkMode":"none"}}',
      '{"Image":"busybox","HostConfig":{"Privileged":"yes"}}',
      '{"Image":"busybox","HostConfig":{"Binds":["/:/host"]},"Cmd":1}',
      'not json',
    ])
      assert.equal(createBodyProblem(b(body), '1.56'), undefined, body);
    assert.ok(execBodyProblem(b('{"Cmd":["sh"],"privileged":true}')));
    assert.ok(updateBodyProblem(b('{"DeviceCgroupRules":["b *:* rwm"]}')));
    assert.ok(volumeBodyProblem(b('{"Name":"x","DriverOpts":{"type":"none","o":"bind","device":"/"}}')));
    assert.equal(
      volumeBodyProblem(b('{"Name":"x","DriverOpts":{"type":"tmpfs","device":"tmpfs","o":"size=1m"}}')),
      undefined,
    );
  });

  it('keeps known defects and their corpus reproducers paired', () => {
    const ids = new Set(KNOWN_DEFECTS.map((k) => k.id));
    const marked = new Set(CORPUS.flatMap((c) => (c.known ? [c.known] : [])));
    for (const id of marked)
      assert.ok(ids.has(id), `corpus case marked with ${id}, which known.ts does not list`);
    for (const id of ids) assert.ok(marked.has(id), `known defect ${id} has no reproducer in the corpus`);
  });
});
