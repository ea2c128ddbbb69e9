import { gzipSync } from 'node:zlib';
import type { Rng } from './rng.js';

/**
 * Small tar archives for the bodies that take one (docker cp's PUT archive, docker import), made
 * synchronously, and broken in the header fields a reader has to check (size, mode, checksum,
 * type). Entry names are always relative names of letters and dots-free words: hostile names
 * (`..`, absolute, links out of the root) belong to the hostile tar suite, not to the fuzzer, which
 * must never write outside a container by luck.
 */

function octal(n: number, width: number): string {
  return `${n.toString(8).padStart(width - 1, '0')}\0`;
}

function header(name: string, size: number, type: string, link: string, mode: number): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100, 'utf8');
  h.write(octal(mode, 8), 100, 'latin1');
  h.write(octal(0, 8), 108, 'latin1');
  h.write(octal(0, 8), 116, 'latin1');
  h.write(octal(size, 12), 124, 'latin1');
  h.write(octal(0, 12), 136, 'latin1');
  h.write('        ', 148, 'latin1');
  h.write(type, 156, 'latin1');
  h.write(link, 157, 100, 'utf8');
  h.write('ustar\u000000', 257, 'latin1');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return h;
}

function entry(name: string, data: Buffer, type = '0', link = '', mode = 0o644): Buffer {
  const pad = (512 - (data.length % 512)) % 512;
  return Buffer.concat([header(name, data.length, type, link, mode), data, Buffer.alloc(pad)]);
}

const END = Buffer.alloc(1024);

function safeName(rng: Rng): string {
  const word = () => rng.chars(rng.int(1, 12), 'abcdefghijklmnopqrstuvwxyz0123456789_-');
  return rng.chance(0.3) ? `fz-${word()}/${word()}` : `fz-${word()}`;
}

/** A valid little tar: a few files and maybe a directory. */
export function smallTar(rng: Rng): Buffer {
  const parts: Buffer[] = [];
  const n = rng.int(0, 3);
  for (let i = 0; i < n; i++) {
    if (rng.chance(0.2)) parts.push(entry(`fz-dir${i}/`, Buffer.alloc(0), '5', '', 0o755));
    else parts.push(entry(safeName(rng), Buffer.from(`content ${i}\n`)));
  }
  parts.push(END);
  return Buffer.concat(parts);
}

/** A tar, whole or broken in one of its fields, maybe gzipped. */
export function fuzzTar(rng: Rng): Buffer {
  let tar = smallTar(rng);
  switch (rng.int(0, 12)) {
    case 0: // a checksum that does not add up
      if (tar.length > 1024) tar.write('0000000\0', 148, 'latin1');
      break;
    case 1: // a size past the end of the archive
      if (tar.length > 1024) tar.write(octal(rng.pick([1, 511, 513, 8 ** 11 - 1]), 12), 124, 'latin1');
      break;
    case 2: // cut short
      tar = tar.subarray(0, rng.int(0, tar.length));
      break;
    case 3: // another type; links point at a relative name inside
      tar = Buffer.concat([
        entry(
          safeName(rng),
          Buffer.alloc(0),
          rng.pick(['1', '2', '3', '4', '6', '7', 'x', 'K', 'g']),
          'fz-target',
        ),
        END,
      ]);
      break;
    case 4: // a mode with every bit
      tar = Buffer.concat([entry(safeName(rng), Buffer.from('x'), '0', '', 0o7777), END]);
      break;
    case 5:
      tar = gzipSync(tar);
      break;
    case 6:
      tar = gzipSync(tar).subarray(0, rng.int(1, 20));
      break;
    case 7:
      tar = rng.bytes(rng.size(4096));
      break;
    case 8: // not octal
      if (tar.length > 1024) tar.write('zzzzzzzzzzz\0', 124, 'latin1');
      break;
    case 9:
      tar = Buffer.alloc(rng.pick([0, 512, 1024, 10_240]));
      break;
    default:
      break;
  }
  return tar;
}

/**
 * Dockerfile lines a fuzzed build may hold: local bases only (busybox, scratch, an earlier stage),
 * RUN steps that touch nothing outside their container, and lines the parser must refuse.
 */
const BUILD_LINES = [
  'FROM busybox',
  'FROM scratch',
  'FROM busybox AS fz',
  'FROM fz',
  'ARG FZ=1',
  'ENV FZ=${FZ:-x} B=$FZ',
  'LABEL fz=1',
  'EXPOSE 80/udp',
  'WORKDIR /fz',
  'USER 1:1',
  'VOLUME /fz-v',
  'STOPSIGNAL SIGTERM',
  'CMD ["true"]',
  'ENTRYPOINT ["sh"]',
  'SHELL ["/bin/sh", "-c"]',
  'HEALTHCHECK --interval=1s CMD true',
  'ONBUILD LABEL fz=2',
  'RUN true',
  'RUN echo fz && exit 3',
  'RUN ["true"]',
  'RUN --network=none true',
  'RUN --mount=type=tmpfs,target=/t true',
  'RUN --mount=type=cache,target=/c,id=fz true',
  'RUN <<EOF\ntrue\nEOF',
  'COPY . /fz',
  'COPY fz-* /fz/',
  'COPY --from=fz /etc/passwd /p',
  'ADD fz-a.tar /fz',
  'COPY <<EOF /fz/h\nhi\nEOF',
  'COPY missing /x',
  'BOGUS line',
  'FROM',
  'RUN --mount=type=bogus true',
  'ENV',
  '# comment \\',
  'RUN echo a \\\n  b',
];

/** A build context: a Dockerfile drawn from BUILD_LINES (or none), maybe .dockerignore, a few files. */
export function buildContextTar(rng: Rng): Buffer {
  const parts: Buffer[] = [];
  if (rng.chance(0.9)) {
    const lines = [rng.chance(0.85) ? 'FROM busybox' : rng.pick(BUILD_LINES)];
    for (let i = rng.int(0, 6); i > 0; i--) lines.push(rng.pick(BUILD_LINES));
    parts.push(entry(rng.chance(0.9) ? 'Dockerfile' : 'dockerfile', Buffer.from(`${lines.join('\n')}\n`)));
  }
  if (rng.chance(0.2))
    parts.push(entry('.dockerignore', Buffer.from(rng.pick(['fz-*', '!fz-a', '**', '\n']))));
  if (rng.chance(0.2)) parts.push(entry('fz-a.tar', smallTar(rng)));
  parts.push(smallTar(rng).subarray(0, -END.length));
  parts.push(END);
  return Buffer.concat(parts);
}
