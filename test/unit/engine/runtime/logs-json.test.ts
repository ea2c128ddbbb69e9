import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  attrsField,
  decodeEntry,
  goJsonString,
  JsonEntryEncoder,
} from '../../../../src/engine/runtime/logs/json-file.js';

const T = Buffer.from('2026-11-21T09:57:44.621824478Z');

function encode(stream: 'stdout' | 'stderr', data: Buffer | string, attrs?: Record<string, string>): string {
  const enc = new JsonEntryEncoder(attrs);
  enc.add(stream, T, typeof data === 'string' ? Buffer.from(data, 'latin1') : data);
  return enc.take().toString('utf8');
}

describe('json-file entries', () => {
  it('are written byte for byte as dockerd 20.10 writes them', () => {
    // recorded from dockerd 20.10: docker run --label team=a -e FOO=bar --log-opt labels=team,nope
    // --log-opt env=FOO busybox sh -c 'printf "tab\there <a&b> \"q\" back\\\\slash \001 é \342\200\250 \377x\n"'
    const data = Buffer.concat([
      Buffer.from('tab\there <a&b> "q" back\\slash \x01 ', 'latin1'),
      Buffer.from('é ', 'utf8'),
      Buffer.from([0xe2, 0x80, 0xa8, 0x20, 0xff]),
      Buffer.from('x\n'),
    ]);
    assert.equal(
      encode('stdout', data, { team: 'a', FOO: 'bar' }),
      '{"log":"tab\\u0009here \\u003ca\\u0026b\\u003e \\"q\\" back\\\\slash \\u0001 é \\u2028 \\ufffdx\\n","stream":"stdout","attrs":{"FOO":"bar","team":"a"},"time":"2026-11-21T09:57:44.621824478Z"}\n',
    );
    assert.equal(
      encode('stderr', 'err\n'),
      '{"log":"err\\n","stream":"stderr","time":"2026-11-21T09:57:44.621824478Z"}\n',
    );
    // a TTY's line ending, and a partial entry (no newline)
    assert.equal(
      encode('stdout', 'tty\r\n'),
      '{"log":"tty\\r\\n","stream":"stdout","time":"2026-11-21T09:57:44.621824478Z"}\n',
    );
    assert.equal(
      encode('stdout', 'noeol'),
      '{"log":"noeol","stream":"stdout","time":"2026-11-21T09:57:44.621824478Z"}\n',
    );
    // moby leaves out an empty log
    assert.equal(encode('stdout', ''), '{"stream":"stdout","time":"2026-11-21T09:57:44.621824478Z"}\n');
  });

  it('escape invalid UTF-8 byte by byte, keep valid multi-byte characters', () => {
    const enc = (bytes: number[]) => JSON.parse(encode('stdout', Buffer.from(bytes))).log as string;
    assert.equal(enc([0xf0, 0x9f, 0x98, 0x80]), '😀');
    assert.equal(enc([0xc0, 0x80]), '\ufffd\ufffd', 'overlong');
    assert.equal(enc([0xed, 0xa0, 0x80]), '\ufffd\ufffd\ufffd', 'surrogate');
    assert.equal(enc([0xe2, 0x82]), '\ufffd\ufffd', 'cut short');
    assert.equal(enc([0xf4, 0x90, 0x80, 0x80]), '\ufffd\ufffd\ufffd\ufffd', 'above U+10FFFF');
  });

  it('attrs as Go marshals a map (sorted keys, encoding/json escaping)', () => {
    assert.equal(attrsField(undefined), '');
    assert.equal(attrsField({}), '');
    assert.equal(attrsField({ b: '1', a: 'x\ty<' }), ',"attrs":{"a":"x\\ty\\u003c","b":"1"}');
    assert.equal(goJsonString('é"'), '"é\\""');
  });

  it('decode what they encode, in place, for any valid text', () => {
    const samples = [
      'hello\n',
      'a"b\\c\n',
      '<tag> & more\n',
      'tab\tcr\r\n',
      'é ü 😀 \u2028\u2029\n',
      '\x00\x1f\x7f',
      'x',
    ];
    for (const text of samples) {
      for (const stream of ['stdout', 'stderr'] as const) {
        const line = Buffer.from(encode(stream, Buffer.from(text, 'utf8'), { k: 'v' }));
        const e = decodeEntry(line)!;
        assert.ok(e, text);
        assert.equal(e.stream, stream);
        assert.equal(e.log.toString('utf8'), text);
        assert.equal(line.toString('latin1', e.timeStart, e.timeEnd), T.toString());
        assert.deepEqual(JSON.parse(line.toString('utf8', e.attrsStart, e.attrsEnd)), { k: 'v' });
      }
    }
    let seed = 7;
    for (let n = 0; n < 200; n++) {
      let text = '';
      seed = (seed * 1103515245 + 12345) >>> 0;
      const len = seed % 60;
      for (let i = 0; i < len; i++) {
        seed = (seed * 1103515245 + 12345) >>> 0;
        const pick = seed % 5;
        text +=
          pick === 0
            ? String.fromCharCode(seed % 32)
            : pick === 1
              ? '"\\<>&'[seed % 5]
              : pick === 2
                ? ['é', '😀', '\u2028'][seed % 3]
                : 'abc '[seed % 4];
      }
      const e = decodeEntry(Buffer.from(encode('stdout', Buffer.from(text, 'utf8'))))!;
      assert.equal(e.log.toString('utf8'), text);
    }
  });

  it('decode other writers’ key order and escapes through the slow path; skip what is not an entry', () => {
    const e = decodeEntry(
      Buffer.from('{"time":"2026-11-21T10:00:00Z","stream":"stderr","log":"a\\/b\\t\\ud83d\\ude00"}\n'),
    )!;
    assert.equal(e.stream, 'stderr');
    assert.equal(e.log.toString(), 'a/b\t😀');
    assert.equal(e.parsed?.time, '2026-11-21T10:00:00Z');
    const empty = decodeEntry(Buffer.from('{"stream":"stdout","time":"2026-11-21T10:00:00Z"}\n'))!;
    assert.equal(empty.log.length, 0);
    assert.equal(empty.stream, 'stdout');
    const lone = decodeEntry(
      Buffer.from('{"log":"\\ud800x","stream":"stdout","time":"2026-11-21T10:00:00Z"}'),
    )!;
    assert.equal(lone.log.toString(), '\ufffdx');
    assert.equal(decodeEntry(Buffer.from('garbage\n')), null);
    assert.equal(
      decodeEntry(Buffer.from('{"log":"x","stream":"stdin","time":"2026-11-21T10:00:00Z"}\n')),
      null,
    );
    assert.equal(decodeEntry(Buffer.from('{"log":"torn","stream":"std')), null);
  });
});
