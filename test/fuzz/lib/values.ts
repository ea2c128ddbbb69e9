import type { Rng } from './rng.js';

/**
 * Interesting values shared by both fuzzers: strings, numbers, path segments, query values. None
 * of them names a host path or a command that could do harm if a container ran it.
 */

const WORDS = [
  '',
  ' ',
  'a',
  'fz',
  'true',
  'false',
  'null',
  '0',
  '1',
  '-1',
  'none',
  'latest',
  'busybox',
  'sh',
  'echo',
  'sleep',
  'x'.repeat(64),
  'é',
  '☃',
  '\u0000',
  '\u001b[0m',
  '\ud800',
  '%s%n',
  '${HOME}',
  '$(true)',
  "'",
  '"',
  '\\',
  '/',
  '//',
  '.',
  '..',
  '../..',
  '*',
  '?',
  '#',
  '&',
  '=',
  ';',
  ':',
  ',',
  '\r\n',
  '\n',
  '\t',
  'sha256:',
  `sha256:${'0'.repeat(64)}`,
  `sha256:${'f'.repeat(63)}`,
  'SHA256:AA',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
];

export function word(rng: Rng): string {
  return rng.pick(WORDS);
}

/** A string: a word, random printable or any characters, sometimes long. */
export function anyString(rng: Rng, maxLen = 300): string {
  switch (rng.int(0, 5)) {
    case 0:
    case 1:
      return word(rng);
    case 2:
      return rng.chars(rng.size(maxLen), 'abcdefghijklmnopqrstuvwxyz0123456789-_.');
    case 3:
      return rng.chars(rng.size(maxLen), 'aZ09 !"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~é☃\u0000\u0007\n');
    case 4:
      return `${word(rng)}${word(rng)}${word(rng)}`;
    default: {
      let s = '';
      const n = rng.size(maxLen);
      for (let i = 0; i < n; i++) s += String.fromCharCode(rng.int(0, 0xffff));
      return s;
    }
  }
}

const NUMBERS = [
  0,
  -0,
  1,
  -1,
  2,
  7,
  255,
  256,
  65535,
  65536,
  2 ** 31 - 1,
  2 ** 31,
  -(2 ** 31),
  2 ** 32,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 53),
  2 ** 63,
  -(2 ** 63),
  2 ** 64,
  1e308,
  -1e308,
  5e-324,
  0.5,
  1.5,
  -1.5,
  3.25,
];

export function anyNumber(rng: Rng): number {
  return rng.chance(0.8) ? rng.pick(NUMBERS) : rng.int(-1_000_000, 1_000_000);
}

/** Number-like text for query parameters and headers. */
export function numberText(rng: Rng): string {
  return rng.pick([
    '0',
    '1',
    '-1',
    '2',
    '10',
    '+1',
    ' 1',
    '1 ',
    '01',
    '0x10',
    '1e3',
    '1.5',
    '-0',
    '',
    'NaN',
    'Infinity',
    '-Infinity',
    '9007199254740993',
    '99999999999999999999',
    '-99999999999999999999',
    '18446744073709551616',
    '2147483648',
    '4294967296',
    '٣',
    'abc',
    '1,2',
    '1_000',
  ]);
}

export function boolText(rng: Rng): string {
  return rng.pick([
    '1',
    '0',
    'true',
    'false',
    'True',
    'FALSE',
    'yes',
    'no',
    'none',
    '',
    ' ',
    'x',
    '2',
    't',
    'f',
  ]);
}

/**
 * Percent-encode `s` as encodeURIComponent does, byte by byte of its UTF-8 (a lone surrogate is
 * U+FFFD), never throwing.
 */
export function pct(s: string): string {
  let out = '';
  for (const b of Buffer.from(s)) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9\-_.!~*'()]/.test(c) ? c : `%${b.toString(16).padStart(2, '0').toUpperCase()}`;
  }
  return out;
}

/** Like encodeURI: `/`, `:`, `@` and the like kept. */
export function pctPath(s: string): string {
  return pct(s).replace(/%(2F|3A|40|2B|2C|3B|3D|24|26)/g, (m) => decodeURIComponent(m));
}

/** Percent-encode every byte of `s` (UTF-8). */
export function encodeAll(s: string): string {
  return [...Buffer.from(s)].map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join('');
}

/** A garbage path segment: dots, encodings, bad escapes, long, control bytes. */
export function badSegment(rng: Rng): string {
  switch (rng.int(0, 14)) {
    case 0:
      return '..';
    case 1:
      return '.';
    case 2:
      return '%2e%2e';
    case 3:
      return '%2F';
    case 4:
      return '%00';
    case 5:
      return '%ZZ';
    case 6:
      return '%';
    case 7:
      return '%c0%ae%c0%ae';
    case 8:
      return 'a'.repeat(rng.pick([256, 4096, 16_000, 70_000]));
    case 9:
      return encodeAll(anyString(rng, 20));
    case 10:
      return '%ff%fe';
    case 11:
      return '';
    case 12:
      return '..%2F..%2F..%2Fetc';
    case 13:
      return rng.chars(rng.int(1, 12), "abc;,=@:+$!~*'()[]");
    default:
      return pct(anyString(rng, 40));
  }
}

/** What a query value may look like, for a parameter of unknown type. */
export function queryValue(rng: Rng): string {
  switch (rng.int(0, 9)) {
    case 0:
      return boolText(rng);
    case 1:
      return numberText(rng);
    case 2:
      return pct(anyString(rng, 80));
    case 3:
      return badSegment(rng);
    case 4:
      return 'x'.repeat(rng.pick([1000, 10_000, 60_000]));
    case 5:
      return pct(filtersValue(rng));
    case 6:
      return rng.pick(['', '%', '%2', '+', '&', '=', '%26', '%3D', '%00']);
    default:
      return pct(word(rng));
  }
}

/** A `filters` value: dockerd's JSON map, or not quite. */
export function filtersValue(rng: Rng): string {
  const names = [
    'status',
    'label',
    'name',
    'id',
    'ancestor',
    'before',
    'since',
    'until',
    'dangling',
    'reference',
    'type',
    'event',
    'container',
    'image',
    'volume',
    'driver',
    'exited',
    'health',
    'network',
    'is-task',
    'publish',
    'expose',
    'scope',
    'all',
    anyString(rng, 10),
  ];
  const values = [
    'running',
    'exited',
    'created',
    'paused',
    'true',
    'false',
    '1',
    '0',
    'busybox',
    'fz',
    'a=b',
    'a',
    '10m',
    '-1h',
    '2020-01-01T00:00:00Z',
    '1700000000',
    '99999999999999999999',
    'healthy',
    '[',
    '',
    anyString(rng, 20),
  ];
  switch (rng.int(0, 11)) {
    case 0:
      return '{';
    case 1:
      return 'null';
    case 2:
      return '[]';
    case 3:
      return '"x"';
    case 4:
      return `{"${rng.pick(names)}":${rng.pick(['1', '"x"', 'null', 'true', '[1]', '{"a":1}', '[[]]'])}}`;
    case 5:
      return `${'['.repeat(5000)}${']'.repeat(5000)}`;
    case 6:
      return JSON.stringify({ [rng.pick(names)]: { [rng.pick(values)]: rng.pick([true, false, 1, null]) } });
    default: {
      const out: Record<string, string[]> = {};
      const n = rng.int(1, 3);
      for (let i = 0; i < n; i++) {
        const name = rng.pick(names);
        out[name] = Array.from({ length: rng.int(0, 3) }, () => rng.pick(values));
      }
      return JSON.stringify(out);
    }
  }
}

/** A timestamp-ish query value. */
export function timeText(rng: Rng): string {
  return rng.pick([
    '0',
    '1',
    '-1',
    '1700000000',
    '1700000000.5',
    '1700000000.123456789123',
    '99999999999999999999',
    '-99999999999999999999',
    '2020-01-01T00:00:00Z',
    '2020-13-45T99:99:99Z',
    '2020-01-01T00:00:00.123456789+02:00',
    '10m',
    'abc',
    '',
    '.5',
    '1.',
    '1e9',
  ]);
}
