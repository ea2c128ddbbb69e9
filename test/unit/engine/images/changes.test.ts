import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ContainerConfig } from '../../../../src/common/docker-types.js';
import { applyChanges } from '../../../../src/engine/images/changes.js';
import { goQuote, parseGoDuration } from '../../../../src/engine/images/dockerfile/go-text.js';
import { parseDockerfile } from '../../../../src/engine/images/dockerfile/scan.js';
import { processWord, processWords } from '../../../../src/engine/images/dockerfile/shell-words.js';

type Want = { config: ContainerConfig } | { error: string };

/**
 * dockerd 20.10.24's answers to `POST /images/create?fromSrc=-&changes=...` (one `changes`
 * parameter per string) on an empty tarball: the image's Config without its empty fields, or
 * the 400 error message. Recorded from the reference daemon.
 */
const DOCKERD: Array<[string[], Want]> = [
  [['USER a b'], { config: { User: 'a b' } }],
  [['WORKDIR a b'], { config: { WorkingDir: '/a b' } }],
  [['CMD ["a", 1]'], { error: 'when using JSON array syntax, arrays must be comprised of strings only' }],
  [['# comment'], { error: 'file with no instructions' }],
  [[''], { error: 'file with no instructions' }],
  [['FOO bar'], { error: 'foo is not a valid change command' }],
  [['EXPOSE 0'], { config: { ExposedPorts: { '0/tcp': {} } } }],
  [['EXPOSE 80:90'], { config: { ExposedPorts: { '90/tcp': {} } } }],
  [['EXPOSE 8080/tcp/udp'], { config: { ExposedPorts: { '8080/tcp': {} } } }],
  [['HEALTHCHECK CMD'], { error: 'Missing command after HEALTHCHECK CMD' }],
  [['WORKDIR ""'], { error: 'cannot normalize nothing' }],
  [['CMD'], { config: { Cmd: ['/bin/sh', '-c'] } }],
  [['ENTRYPOINT []'], { config: {} }],
  [
    ['VOLUME /a "b c"'],
    {
      error: 'failed to process "\\"b": unexpected end of statement while looking for matching double-quote',
    },
  ],
  [['EXPOSE 70000'], { error: 'Invalid containerPort: 70000' }],
  [['EXPOSE 80-70'], { error: 'Invalid containerPort: 80-70' }],
  [['EXPOSE 80/foo'], { error: 'Invalid proto: foo' }],
  [['ENV A'], { error: 'ENV must have two arguments' }],
  [['LABEL a'], { error: 'LABEL must have two arguments' }],
  [['ENV =x'], { error: 'ENV names can not be blank' }],
  [['HEALTHCHECK'], { error: 'HEALTHCHECK requires at least one argument' }],
  [['HEALTHCHECK --retries=x CMD true'], { error: 'strconv.ParseInt: parsing "x": invalid syntax' }],
  [['HEALTHCHECK --interval=5 CMD true'], { error: 'time: missing unit in duration "5"' }],
  [['ENV A=${B:?err}'], { error: 'failed to process "${B:?err}": B: err' }],
  // newer dockerd (not 20.10) takes STOPSIGNAL
  [['STOPSIGNAL SIGQUIT'], { config: { StopSignal: 'SIGQUIT' } }],
  [['MAINTAINER me'], { error: 'maintainer is not a valid change command' }],
  [['ARG a=b'], { error: 'arg is not a valid change command' }],
  [['SHELL ["/bin/bash"]'], { error: 'shell is not a valid change command' }],
  [['ONBUILD RUN x   '], { config: { OnBuild: ['RUN x   '] } }],
  [['WORKDIR /a/../b/'], { config: { WorkingDir: '/a/../b/' } }],
  [['VOLUME a'], { config: { Volumes: { a: {} } } }],
  [['CMD ["a"] junk'], { config: { Cmd: ['a'] } }],
  [['HEALTHCHECK --interval=5s NONE'], { config: { Healthcheck: { Test: ['NONE'] } } }],
  [['HEALTHCHECK --interval=0s CMD true'], { error: 'Interval "interval" cannot be less than 1ms' }],
  [['ENV A  b   c'], { config: { Env: ['A=b   c'] } }],
  [['ENV ${X}=1'], { config: { Env: ['=1'] } }],
  [['CMD []'], { config: { Cmd: [] } }],
  [['ENTRYPOINT'], { config: {} }],
  [['cmd echo hi'], { config: { Cmd: ['/bin/sh', '-c', 'echo hi'] } }],
  [['Env A=1'], { config: { Env: ['A=1'] } }],
  [['ENV a=1 \\', 'b=2'], { config: { Env: ['a=1', 'b=2'] } }],
  [['ENV a=1 \\', '# comment', 'b=2'], { config: { Env: ['a=1', 'b=2'] } }],
  [['ENV a=1 \\', '', 'b=2'], { config: { Env: ['a=1', 'b=2'] } }],
  [['ENV a=1 \\', '   ', 'b=2'], { config: { Env: ['a=1', 'b=2'] } }],
  [['# escape=`', 'ENV A=a`$b C="x`"y"'], { config: { Env: ['A=a$b', 'C=x"y'] } }],
  [['#escape=x', 'USER a'], { error: "invalid escape token 'x' does not match ` or \\" }],
  [['# escape=`', '# escape=`', 'USER a'], { error: 'only one escape parser directive can be used' }],
  [['USER a', '# escape=`', 'USER b\\'], { config: { User: 'b' } }],
  [['ONBUILD'], { error: 'ONBUILD requires at least one argument' }],
  [['ONBUILD onbuild x'], { error: "Chaining ONBUILD via `ONBUILD ONBUILD` isn't allowed" }],
  [['ONBUILD from x'], { error: "FROM isn't allowed as an ONBUILD trigger" }],
  [['ONBUILD maintainer x'], { error: "MAINTAINER isn't allowed as an ONBUILD trigger" }],
  [['ONBUILD FOO bar'], { config: { OnBuild: ['FOO bar'] } }],
  [
    ['ONBUILD CMD ["a",1]'],
    { error: 'when using JSON array syntax, arrays must be comprised of strings only' },
  ],
  [['  onbuild   RUN  x'], { config: { OnBuild: ['RUN  x'] } }],
  [['ONBUILD --foo RUN x'], { error: 'Unknown flag: foo' }],
  [['ONBUILD RUN a \\', '  b'], { config: { OnBuild: ['RUN a   b'] } }],
  [['ENV P=80', 'EXPOSE $P'], { config: { ExposedPorts: { '80/tcp': {} }, Env: ['P=80'] } }],
  [
    ['ENV PS="80 443"', 'EXPOSE $PS'],
    { config: { ExposedPorts: { '443/tcp': {}, '80/tcp': {} }, Env: ['PS=80 443'] } },
  ],
  [['EXPOSE "80"'], { config: { ExposedPorts: { '80/tcp': {} } } }],
  [['EXPOSE 90 80/udp abc'], { error: 'Invalid containerPort: abc' }],
  [['EXPOSE 1.2.3.4:80:90'], { config: { ExposedPorts: { '90/tcp': {} } } }],
  [['EXPOSE [::1]:80:90'], { config: { ExposedPorts: { '90/tcp': {} } } }],
  [['EXPOSE ::1:80:90'], { error: 'Invalid ip address ::1: address ::1:: too many colons in address' }],
  [
    ['EXPOSE 80-90-100'],
    {
      config: {
        ExposedPorts: {
          '80/tcp': {},
          '81/tcp': {},
          '82/tcp': {},
          '83/tcp': {},
          '84/tcp': {},
          '85/tcp': {},
          '86/tcp': {},
          '87/tcp': {},
          '88/tcp': {},
          '89/tcp': {},
          '90/tcp': {},
        },
      },
    },
  ],
  [
    ['EXPOSE 8000:8001-8002'],
    { error: 'Invalid ranges specified for container and host Ports: 8001-8002 and 8000' },
  ],
  [['EXPOSE 8000-8001:80'], { config: { ExposedPorts: { '80/tcp': {} } } }],
  [
    ['EXPOSE 80:8000-8001'],
    { error: 'Invalid ranges specified for container and host Ports: 8000-8001 and 80' },
  ],
  [['EXPOSE /tcp'], { error: 'No port specified: /tcp<empty>' }],
  [['EXPOSE 80/'], { config: { ExposedPorts: { '80/tcp': {} } } }],
  [['EXPOSE 80/TCP'], { config: { ExposedPorts: { '80/tcp': {} } } }],
  [['EXPOSE 080'], { config: { ExposedPorts: { '80/tcp': {} } } }],
  [['EXPOSE a:80'], { error: 'Invalid hostPort: a' }],
  [['EXPOSE 1-2-3'], { config: { ExposedPorts: { '1/tcp': {}, '2/tcp': {} } } }],
  [['EXPOSE'], { error: 'EXPOSE requires at least one argument' }],
  [['EXPOSE 65536'], { error: 'Invalid containerPort: 65536' }],
  [['EXPOSE -80'], { error: 'Invalid containerPort: -80' }],
  [['EXPOSE 80:'], { error: 'No port specified: 80:<empty>' }],
  [['EXPOSE :80'], { config: { ExposedPorts: { '80/tcp': {} } } }],
  [['EXPOSE 1.2.3.4::80'], { config: { ExposedPorts: { '80/tcp': {} } } }],
  [['EXPOSE 80/udp/tcp 80/sctp'], { config: { ExposedPorts: { '80/sctp': {}, '80/udp': {} } } }],
  [['EXPOSE 300.1.1.1:80:90'], { error: 'Invalid ip address: 300.1.1.1' }],
  [['EXPOSE x:y:80'], { error: 'Invalid ip address: x' }],
  [['ENV H=/h', 'VOLUME ["/a", "$H"]'], { config: { Env: ['H=/h'], Volumes: { '/a': {}, '/h': {} } } }],
  [['VOLUME ["/a b"]'], { config: { Volumes: { '/a b': {} } } }],
  [['VOLUME [" "]'], { error: 'VOLUME specified can not be an empty string' }],
  [['VOLUME []'], { error: 'VOLUME requires at least one argument' }],
  [['VOLUME'], { error: 'VOLUME requires at least one argument' }],
  [['VOLUME ${X}'], { error: 'VOLUME specified can not be an empty string' }],
  [['VOLUME   /a   /b  '], { config: { Volumes: { '/a': {}, '/b': {} } } }],
  [['VOLUME ["/a", 1]'], { error: 'when using JSON array syntax, arrays must be comprised of strings only' }],
  [['VOLUME ["/a"'], { config: { Volumes: { '[/a': {} } } }],
  [['VOLUME ""'], { error: 'VOLUME specified can not be an empty string' }],
  [
    ['ENV A=1 B="two words" C=${A}x', 'ENV D=${A}y', 'ENV LEGACY some value', 'ENV A=3'],
    { config: { Env: ['A=3', 'B=two words', 'C=x', 'D=1y', 'LEGACY=some value'] } },
  ],
  [['ENV "a=b" c'], { error: 'Syntax error - can\'t find = in "c". Must be of the form: name=value' }],
  [['ENV a=b c'], { error: 'Syntax error - can\'t find = in "c". Must be of the form: name=value' }],
  [["ENV A='x y'"], { config: { Env: ['A=x y'] } }],
  [['ENV A\\ B=c'], { config: { Env: ['A B=c'] } }],
  [['ENV A "x y"'], { config: { Env: ['A=x y'] } }],
  [['ENV A='], { config: { Env: ['A='] } }],
  [['ENV A=1 A=2'], { config: { Env: ['A=2'] } }],
  [['ENV PATH=$PATH:/x'], { config: { Env: ['PATH=:/x'] } }],
  [['ENV'], { error: 'ENV requires at least one argument' }],
  [
    ["ENV A 'b"],
    { error: 'failed to process "\'b": unexpected end of statement while looking for matching single-quote' },
  ],
  [
    ['ENV A="b'],
    {
      error: 'failed to process "\\"b": unexpected end of statement while looking for matching double-quote',
    },
  ],
  [['ENV --x=1 A=b'], { error: 'Unknown flag: x' }],
  [['LABEL "a b"=c'], { config: { Labels: { 'a b': 'c' } } }],
  [['LABEL a=b=c'], { config: { Labels: { a: 'b=c' } } }],
  [['ENV V=1', 'LABEL v=$V "k$V"=x'], { config: { Env: ['V=1'], Labels: { k1: 'x', v: '1' } } }],
  [['LABEL'], { error: 'LABEL requires at least one argument' }],
  [['LABEL a b c'], { config: { Labels: { a: 'b c' } } }],
  [['LABEL =x'], { error: 'LABEL names can not be blank' }],
  [['ENV U=bob', 'USER $U'], { config: { User: 'bob', Env: ['U=bob'] } }],
  [['USER'], { error: 'USER requires exactly one argument' }],
  [['USER "a b"'], { config: { User: 'a b' } }],
  [['USER a # c'], { config: { User: 'a # c' } }],
  [['USER a\\'], { config: { User: 'a' } }],
  [
    ["USER 'a"],
    { error: 'failed to process "\'a": unexpected end of statement while looking for matching single-quote' },
  ],
  [['WORKDIR a', 'WORKDIR b'], { config: { WorkingDir: '/a/b' } }],
  [['WORKDIR /a', 'WORKDIR ..'], { config: { WorkingDir: '/' } }],
  [['ENV D=/d', 'WORKDIR $D/x'], { config: { Env: ['D=/d'], WorkingDir: '/d/x' } }],
  [['WORKDIR'], { error: 'WORKDIR requires exactly one argument' }],
  [['WORKDIR //a//b/'], { config: { WorkingDir: '//a//b/' } }],
  [['WORKDIR a/./b/'], { config: { WorkingDir: '/a/b' } }],
  [['WORKDIR ${X}'], { error: 'cannot normalize nothing' }],
  [['HEALTHCHECK cmd true'], { config: { Healthcheck: { Test: ['CMD-SHELL', 'true'] } } }],
  [['HEALTHCHECK NONE x'], { error: 'HEALTHCHECK NONE takes no arguments' }],
  [['HEALTHCHECK none'], { config: { Healthcheck: { Test: ['NONE'] } } }],
  [['HEALTHCHECK FOO x'], { error: 'Unknown type "FOO" in HEALTHCHECK (try CMD)' }],
  [['HEALTHCHECK --foo=1 CMD x'], { error: 'Unknown flag: foo' }],
  [['HEALTHCHECK --interval CMD x'], { error: 'Missing a value on flag: interval' }],
  [['HEALTHCHECK --interval=1s --interval=2s CMD x'], { error: 'Duplicate flag specified: interval' }],
  [['HEALTHCHECK --start-interval=1s CMD x'], { error: 'Unknown flag: start-interval' }],
  [['HEALTHCHECK --timeout=-1s CMD x'], { error: 'Interval "timeout" cannot be less than 1ms' }],
  [['HEALTHCHECK --retries=0 CMD x'], { error: '--retries must be at least 1 (not 0)' }],
  [['HEALTHCHECK --retries=+3 CMD x'], { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Retries: 3 } } }],
  [
    ['HEALTHCHECK --retries=99999999999 CMD x'],
    { error: 'strconv.ParseInt: parsing "99999999999": value out of range' },
  ],
  [
    ['HEALTHCHECK --interval=1.5m --timeout=2h45m --start-period=.5s CMD x'],
    {
      config: {
        Healthcheck: {
          Test: ['CMD-SHELL', 'x'],
          Interval: 90000000000,
          Timeout: 9900000000000,
          StartPeriod: 500000000,
        },
      },
    },
  ],
  [['HEALTHCHECK --interval=1x CMD x'], { error: 'time: unknown unit "x" in duration "1x"' }],
  [['HEALTHCHECK --interval= --retries= CMD x'], { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'] } } }],
  [['HEALTHCHECK CMD []'], { error: 'Missing command after HEALTHCHECK CMD' }],
  [
    ['HEALTHCHECK CMD ["a", 1]'],
    { error: 'when using JSON array syntax, arrays must be comprised of strings only' },
  ],
  [['HEALTHCHECK CMD ["a"]'], { config: { Healthcheck: { Test: ['CMD', 'a'] } } }],
  [['HEALTHCHECK --interval=500us CMD x'], { error: 'Interval "interval" cannot be less than 1ms' }],
  [
    ['HEALTHCHECK CMD   curl  -f   "x y"  '],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'curl  -f   "x y"'] } } },
  ],
  [
    ['HEALTHCHECK --interval="5s" CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Interval: 5000000000 } } },
  ],
  [
    ['HEALTHCHECK --interval=5\u00b5s CMD x'],
    { error: 'time: unknown unit "\\xc3\\x82\\xc2\\xb5s" in duration "5\\xc3\\x82\\xc2\\xb5s"' },
  ],
  [
    ['HEALTHCHECK --interval=5\u00e9 CMD x'],
    { error: 'time: unknown unit "\\xc3\\x83\\xc2\\xa9" in duration "5\\xc3\\x83\\xc2\\xa9"' },
  ],
  [['HEALTHCHECK --interval=9999999999h CMD x'], { error: 'time: invalid duration "9999999999h"' }],
  [['CMD --foo x'], { error: 'Unknown flag: foo' }],
  [['ENTRYPOINT ["a"]', 'CMD x'], { config: { Cmd: ['/bin/sh', '-c', 'x'], Entrypoint: ['a'] } }],
  [['CMD []', 'ENTRYPOINT x'], { config: { Entrypoint: ['/bin/sh', '-c', 'x'] } }],
  [
    ['CMD x', 'ENTRYPOINT y'],
    { config: { Cmd: ['/bin/sh', '-c', 'x'], Entrypoint: ['/bin/sh', '-c', 'y'] } },
  ],
  [['CMD ["a",'], { config: { Cmd: ['/bin/sh', '-c', '["a",'] } }],
  [['CMD [ "a" ]'], { config: { Cmd: ['a'] } }],
  [['CMD  echo  hi  '], { config: { Cmd: ['/bin/sh', '-c', 'echo  hi'] } }],
  [['ENTRYPOINT  ["a"]  '], { config: { Entrypoint: ['a'] } }],
  [['CMD ["a"]]'], { config: { Cmd: ['a'] } }],
  [['CMD [{]}'], { config: { Cmd: ['/bin/sh', '-c', '[{]}'] } }],
  [['CMD ["\\u00e9"]'], { config: { Cmd: ['\u00e9'] } }],
  [['CMD -- x'], { config: { Cmd: ['/bin/sh', '-c', 'x'] } }],
  [['CMD --'], { config: { Cmd: ['/bin/sh', '-c'] } }],
  [['USER a\r\nUSER b'], { config: { User: 'b' } }],
  [['FROM x'], { error: 'from is not a valid change command' }],
  [['RUN ["a",1]'], { error: 'when using JSON array syntax, arrays must be comprised of strings only' }],
  [['RUN x', 'BOGUS'], { error: 'run is not a valid change command' }],
  [['USER a', 'ENV'], { error: 'ENV requires at least one argument' }],
  [['ENV', 'RUN x'], { error: 'run is not a valid change command' }],
  [['COPY a b'], { error: 'copy is not a valid change command' }],
  [['ADD a b'], { error: 'add is not a valid change command' }],
  [['\ufeffUSER a'], { config: { User: 'a' } }],
  [['USER a', '\ufeffUSER b'], { error: '\ufeffuser is not a valid change command' }],
  [['ENV A=${B:?}'], { error: 'failed to process "${B:?}": B: is not allowed to be unset' }],
  [['ENV A=${B?}'], { error: 'failed to process "${B?}": B: is not allowed to be unset' }],
  [['ENV A=${B?oops}'], { error: 'failed to process "${B?oops}": B: oops' }],
  [['ENV B=', 'ENV A=${B:?}'], { error: 'failed to process "${B:?}": B: is not allowed to be empty' }],
  [['ENV B=', 'ENV A=${B?}'], { config: { Env: ['B=', 'A='] } }],
  [
    ['ENV B=1', 'ENV A=${B:+x} C=${B:-y} D=${Z:-y} E=${Z:+x}'],
    { config: { Env: ['B=1', 'A=x', 'C=1', 'D=y', 'E='] } },
  ],
  [['ENV A=${A:=x}'], { error: 'failed to process "${A:=x}": unsupported modifier (=) in substitution' }],
  [['ENV A=${A-x}'], { error: 'failed to process "${A-x}": missing \':\' in substitution' }],
  [['ENV A=${'], { error: 'failed to process "${": syntax error: missing \'}\'' }],
  [['ENV A=${}'], { error: 'failed to process "${}": syntax error: bad substitution' }],
  [['ENV A=${B'], { error: 'failed to process "${B": missing \':\' in substitution' }],
  [['ENV A=$1x'], { config: { Env: ['A=x'] } }],
  [['ENV A=$$x'], { config: { Env: ['A=x'] } }],
  [['ENV A=${-}'], { config: { Env: ['A='] } }],
  [['ENV A=\\$B'], { config: { Env: ['A=$B'] } }],
  [['ENV A="a\\\\b\\c"'], { config: { Env: ['A=a\\b\\c'] } }],
  [['ENV A=${B:-"x y"}'], { config: { Env: ['A=x y'] } }],
  [['ENV ${A=1'], { error: 'failed to process "${A": missing \':\' in substitution' }],
  [['ENV A=${:x}'], { error: 'failed to process "${:x}": syntax error: bad substitution' }],
  [['ENV A=${B:}'], { error: 'failed to process "${B:}": syntax error: missing \'}\'' }],
  [['ENV A=${B:x}'], { error: 'failed to process "${B:x}": unsupported modifier (x) in substitution' }],
  [['ENV A=$ B=$'], { config: { Env: ['A=$', 'B=$'] } }],
  [['ENV A=${B:-${C:-z}}'], { config: { Env: ['A=z'] } }],
  [['ENV A=${{B}'], { error: 'failed to process "${{B}": syntax error: bad substitution' }],
  [['ENV A=a\\'], { config: { Env: ['A=a'] } }],
  [
    ['ENV A="a\\"'],
    {
      error:
        'failed to process "\\"a\\\\\\"": unexpected end of statement while looking for matching double-quote',
    },
  ],
  [['LABEL a  b  c'], { config: { Labels: { a: 'b  c' } } }],
  [['ENV A "b" c'], { config: { Env: ['A=b c'] } }],
  [['ENV A  "b  c"  '], { config: { Env: ['A=b  c'] } }],
  [
    ["USER '\u00e9"],
    {
      error:
        'failed to process "\'\u00e9": unexpected end of statement while looking for matching single-quote',
    },
  ],
  [
    ['ENV a=b \u00e9'],
    { error: 'Syntax error - can\'t find = in "\u00e9". Must be of the form: name=value' },
  ],
  [['ENV a=b \t'], { config: { Env: ['a=b'] } }],
  [['ONBUILD RUN x\t'], { config: { OnBuild: ['RUN x\t'] } }],
  [['ONBUILD RUN x \\'], { config: { OnBuild: ['RUN x '] } }],
  [['HEALTHCHECK --interval=5s'], { error: 'HEALTHCHECK requires at least one argument' }],
  [['HEALTHCHECK --interval=5s CMD'], { error: 'Missing command after HEALTHCHECK CMD' }],
  [['HEALTHCHECK NONE --x'], { error: 'HEALTHCHECK NONE takes no arguments' }],
  [['USER a', 'USER'], { error: 'USER requires exactly one argument' }],
  [['LABEL a=1', 'LABEL b=2'], { config: { Labels: { a: '1', b: '2' } } }],
  [['ENV A=x\tB=y'], { config: { Env: ['A=x', 'B=y'] } }],
  [['ENV A="x\ty"'], { config: { Env: ['A=x\ty'] } }],
  [['EXPOSE 80\t90'], { config: { ExposedPorts: { '80/tcp': {}, '90/tcp': {} } } }],
  [['CMD\techo'], { config: { Cmd: ['/bin/sh', '-c', 'echo'] } }],
  [['ENV\tA=1'], { config: { Env: ['A=1'] } }],
  [['USER\u00a0a'], { error: 'user\u00a0a is not a valid change command' }],
  [['USER a\u00a0'], { config: { User: 'a' } }],
  [['ENV A=\u00e9'], { config: { Env: ['A=\u00e9'] } }],
  [['ENV A \u00e9 b'], { config: { Env: ['A=\u00e9 b'] } }],
  [['WORKDIR /a b'], { config: { WorkingDir: '/a b' } }],
  [['WORKDIR "/a" b'], { config: { WorkingDir: '/a b' } }],
  [['USER "a" b'], { config: { User: 'a b' } }],
  [['ENV A=1', 'WORKDIR ${A:?x}'], { config: { Env: ['A=1'], WorkingDir: '/1' } }],
  [['VOLUME ${A:?x}'], { error: 'failed to process "${A:?x}": A: x' }],
  [['EXPOSE ${A:?x}'], { error: 'failed to process "${A:?x}": A: x' }],
  [
    ['EXPOSE "80 90"'],
    {
      error: 'failed to process "\\"80": unexpected end of statement while looking for matching double-quote',
    },
  ],
  [['EXPOSE 80 ""'], { config: { ExposedPorts: { '80/tcp': {} } } }],
  [['EXPOSE ""'], { config: {} }],
  [['EXPOSE ${X}'], { config: {} }],
  [['ENV P="80/tcp 90/udp"', 'EXPOSE "$P"'], { error: 'Invalid proto: tcp 90' }],
  [['ENV A=1', 'ENV B=2', 'ENV A=3 C=$B'], { config: { Env: ['A=3', 'B=2', 'C=2'] } }],
  [['STOPSIGNAL'], { error: 'STOPSIGNAL requires exactly one argument' }],
  [['STOPSIGNAL SIGNOPE'], { error: 'Invalid signal: SIGNOPE' }],
  [['onbuild RUN a', 'ONBUILD USER b'], { config: { OnBuild: ['RUN a', 'USER b'] } }],
  [['ONBUILD ["a"]'], { config: { OnBuild: ['["a"]'] } }],
  [['ONBUILD ONBUILD'], { error: "Chaining ONBUILD via `ONBUILD ONBUILD` isn't allowed" }],
  [['ONBUILD RUN ["a",1'], { config: { OnBuild: ['RUN ["a",1'] } }],
  [['ONBUILD   '], { error: 'ONBUILD requires at least one argument' }],
  [['HEALTHCHECK CMD ["a"] x'], { config: { Healthcheck: { Test: ['CMD', 'a'] } } }],
  [['HEALTHCHECK CMD  ["a"]'], { config: { Healthcheck: { Test: ['CMD', 'a'] } } }],
  [['HEALTHCHECK CMD "a b"'], { config: { Healthcheck: { Test: ['CMD-SHELL', '"a b"'] } } }],
  [
    ['HEALTHCHECK  --retries=2  CMD  x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Retries: 2 } } },
  ],
  [['HEALTHCHECK --retries=-1 CMD x'], { error: '--retries must be at least 1 (not -1)' }],
  [
    ['HEALTHCHECK --retries=2147483647 CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Retries: 2147483647 } } },
  ],
  [
    ['HEALTHCHECK --retries=2147483648 CMD x'],
    { error: 'strconv.ParseInt: parsing "2147483648": value out of range' },
  ],
  [['HEALTHCHECK --retries=1.5 CMD x'], { error: 'strconv.ParseInt: parsing "1.5": invalid syntax' }],
  [
    ['HEALTHCHECK --interval=1h1h CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Interval: 7200000000000 } } },
  ],
  [
    ['HEALTHCHECK --interval=+1s CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Interval: 1000000000 } } },
  ],
  [['HEALTHCHECK --interval=1 CMD x'], { error: 'time: missing unit in duration "1"' }],
  [['HEALTHCHECK --interval=0 CMD x'], { error: 'Interval "interval" cannot be less than 1ms' }],
  [['HEALTHCHECK --interval=. CMD x'], { error: 'time: invalid duration "."' }],
  [
    ['HEALTHCHECK --interval=1.s CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Interval: 1000000000 } } },
  ],
  [
    ['HEALTHCHECK --interval=2562047h CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Interval: 9223369200000000000 } } },
  ],
  [['HEALTHCHECK --interval=2562048h CMD x'], { error: 'time: invalid duration "2562048h"' }],
  [
    ['HEALTHCHECK --interval=1.0000000001s CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Interval: 1000000000 } } },
  ],
  [
    ['HEALTHCHECK "--interval=5s" CMD x'],
    { error: 'Unknown type "\\"--INTERVAL=5S\\"" in HEALTHCHECK (try CMD)' },
  ],
  [["HEALTHCHECK --interval='5 s' CMD x"], { error: 'time: unknown unit " s" in duration "5 s"' }],
  [
    ['HEALTHCHECK --interval=5\\s CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Interval: 5000000000 } } },
  ],
  [['HEALTHCHECK -- CMD x'], { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'] } } }],
  [['HEALTHCHECK --=1 CMD x'], { error: 'Unknown flag: ' }],
  [['HEALTHCHECK --INTERVAL=1s CMD x'], { error: 'Unknown flag: INTERVAL' }],
  [
    ['HEALTHCHECK --interval=1s--timeout=2s CMD x'],
    { error: 'time: unknown unit "s--timeout=" in duration "1s--timeout=2s"' },
  ],
  [['# escape=`', 'USER a`', 'b'], { config: { User: 'ab' } }],
  [
    ['# escape=`', 'ENV A="x\\"y"'],
    {
      error:
        'failed to process "\\"x\\\\\\"y\\"": unexpected end of statement while looking for matching double-quote',
    },
  ],
  [['# escape=`', 'ENV A="x\\\\y" B=c\\d'], { config: { Env: ['A=x\\\\y', 'B=c\\d'] } }],
  [['# syntax=docker/dockerfile:1', '# escape=`', 'USER a`', 'b'], { config: { User: 'ab' } }],
  [['USER a', '# escape=`', 'USER b`', 'c'], { error: 'c is not a valid change command' }],
  [['  # escape=`', 'USER a`', '  b'], { config: { User: 'a  b' } }],
  [['#', '# escape=`', 'USER a`'], { config: { User: 'a`' } }],
  [['# escape=\\', 'USER a'], { config: { User: 'a' } }],
  [['# ESCAPE = ` ', 'ENV A=`$x'], { config: { Env: ['A=$x'] } }],
  [['# foo=bar', '# escape=`', 'USER a`'], { config: { User: 'a`' } }],
  [
    ['HEALTHCHECK --interval=5s\u00a0CMD x'],
    { error: 'time: unknown unit "s\\xc3\\x82" in duration "5s\\xc3\\x82"' },
  ],
  [['CMD --a=\u00e0b x'], { error: 'Unknown flag: a' }],
  [['CMD --a=\u00e0 x'], { error: 'Unknown flag: a' }],
  [['HEALTHCHECK\u00a0CMD x'], { error: 'healthcheck\u00a0cmd is not a valid change command' }],
  [['HEALTHCHECK CMD\u00a0x'], { error: 'Unknown type "CMD\ufffd" in HEALTHCHECK (try CMD)' }],
  [['HEALTHCHECK C\u00e0MD x'], { error: 'Unknown type "C\ufffd" in HEALTHCHECK (try CMD)' }],
  [['ONBUILD ENV A'], { error: 'ENV must have two arguments' }],
  [['ONBUILD', ' RUN x'], { error: 'run is not a valid change command' }],
  [['ENV A=1 \\'], { config: { Env: ['A=1'] } }],
  [['\\', 'USER a'], { config: { User: 'a' } }],
  [['USER a \\\\'], { config: { User: 'a \\' } }],
  [['LABEL "a"="b" \'c\'=\'d\' e="f g"'], { config: { Labels: { a: 'b', c: 'd', e: 'f g' } } }],
  [['LABEL a="b\\"c"'], { config: { Labels: { a: 'b"c' } } }],
  [['ENV A="$B" B=2'], { config: { Env: ['A=', 'B=2'] } }],
  [
    ['EXPOSE 80 80/tcp 443/udp 100-101/sctp'],
    { config: { ExposedPorts: { '100/sctp': {}, '101/sctp': {}, '443/udp': {}, '80/tcp': {} } } },
  ],
  [['VOLUME /a/../b //c/ ./d'], { config: { Volumes: { './d': {}, '//c/': {}, '/a/../b': {} } } }],
  [['WORKDIR /a', 'WORKDIR ../../b'], { config: { WorkingDir: '/b' } }],
  [['WORKDIR a/'], { config: { WorkingDir: '/a' } }],
  [['WORKDIR /'], { config: { WorkingDir: '/' } }],
  [['ENTRYPOINT ["a"]', 'CMD []'], { config: { Cmd: [], Entrypoint: ['a'] } }],
  [['CMD ["a"]', 'ENTRYPOINT []'], { config: { Cmd: ['a'] } }],
  [['ENTRYPOINT x', 'ENTRYPOINT y'], { config: { Entrypoint: ['/bin/sh', '-c', 'y'] } }],
  [
    ['CMD x', 'ENTRYPOINT []', 'ENTRYPOINT y'],
    { config: { Cmd: ['/bin/sh', '-c', 'x'], Entrypoint: ['/bin/sh', '-c', 'y'] } },
  ],
  [['HEALTHCHECK CMD x', 'HEALTHCHECK NONE'], { config: { Healthcheck: { Test: ['NONE'] } } }],
  [['CMD ["\\ud800"]'], { config: { Cmd: ['\ufffd'] } }],
  [['USER ""'], { config: {} }],
  [['USER a', 'USER ""'], { config: {} }],
  [['ENV A=$B', 'ENV B=x'], { config: { Env: ['A=', 'B=x'] } }],
  [['ENV \u00e9=\u00fc'], { config: { Env: ['\u00e9=\u00fc'] } }],
  [['LABEL "\u65e5\u672c"=\u8a9e'], { config: { Labels: { '\u65e5\u672c': '\u8a9e' } } }],
  [['USER \u00fc'], { config: { User: '\u00fc' } }],
  [['ONBUILD RUN \u00fc'], { config: { OnBuild: ['RUN \u00fc'] } }],
  [['ENV A=${B:-\u00e9}'], { config: { Env: ['A=\u00e9'] } }],
  [['ENV a=b \u0001'], { error: 'Syntax error - can\'t find = in "\\x01". Must be of the form: name=value' }],
  [['ENV a=b \u00a0x'], { error: 'Syntax error - can\'t find = in "x". Must be of the form: name=value' }],
  [['USER ${A:?\u00e9}'], { error: 'failed to process "${A:?\u00e9}": A: \u00e9' }],
  [['ENV A="\\\u00e9"'], { config: { Env: ['A=\\\u00e9'] } }],
  [
    ['ENV A \'x" y'],
    {
      error:
        'failed to process "\'x\\" y": unexpected end of statement while looking for matching single-quote',
    },
  ],
  [['USER a\nCMD b\n\nENV c=d'], { config: { User: 'a', Env: ['c=d'], Cmd: ['/bin/sh', '-c', 'b'] } }],
  [['ENV A=1\\\nB=2'], { config: { Env: ['A=1B=2'] } }],
  [['cmd', 'entrypoint'], { config: {} }],
  [['ExPoSe 80'], { config: { ExposedPorts: { '80/tcp': {} } } }],
  [
    ['HEALTHCHECK --retries=00003 CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Retries: 3 } } },
  ],
  [['HEALTHCHECK --retries=1_0 CMD x'], { error: 'strconv.ParseInt: parsing "1_0": invalid syntax' }],
  [
    ['HEALTHCHECK --timeout=1.5h --interval=100ms CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Interval: 100000000, Timeout: 5400000000000 } } },
  ],
  [
    ['HEALTHCHECK --start-period=1ms CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], StartPeriod: 1000000 } } },
  ],
  [['HEALTHCHECK --interval=-0s CMD x'], { error: 'Interval "interval" cannot be less than 1ms' }],
  [['HEALTHCHECK --interval=0.0001ms CMD x'], { error: 'Interval "interval" cannot be less than 1ms' }],
  [
    ['HEALTHCHECK --interval=1.0015ms CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Interval: 1001500 } } },
  ],
  [
    ['HEALTHCHECK --interval=0.1234567891234s CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Interval: 123456789 } } },
  ],
  [['EXPOSE 80/tcp/'], { config: { ExposedPorts: { '80/tcp': {} } } }],
  [['EXPOSE [::1]80:90'], { error: "Invalid ip address [:: address [::: missing ']' in address" }],
  [['EXPOSE [1.2.3.4]:80:90'], { config: { ExposedPorts: { '90/tcp': {} } } }],
  [['EXPOSE [fe80::1%eth0]:80:90'], { error: 'Invalid ip address: fe80::1%eth0' }],
  [['EXPOSE a]:80:90'], { error: "Invalid ip address a]: address a]:: unexpected ']' in address" }],
  [
    ['EXPOSE 1:2:3:4:80:90'],
    { error: 'Invalid ip address 1:2:3:4: address 1:2:3:4:: too many colons in address' },
  ],
  [
    ['EXPOSE 65530-65535'],
    {
      config: {
        ExposedPorts: {
          '65530/tcp': {},
          '65531/tcp': {},
          '65532/tcp': {},
          '65533/tcp': {},
          '65534/tcp': {},
          '65535/tcp': {},
        },
      },
    },
  ],
  [['EXPOSE 80-'], { error: 'Invalid containerPort: 80-' }],
  [['EXPOSE 80:90-'], { error: 'Invalid containerPort: 90-' }],
  [['EXPOSE [::1:80:90'], { error: "Invalid ip address [::1: address [::1:: missing ']' in address" }],
  [['EXPOSE [a]:80:90'], { error: 'Invalid ip address: a' }],
  [['EXPOSE 01.2.3.4:80:90'], { error: 'Invalid ip address: 01.2.3.4' }],
  [
    ['EXPOSE ::ffff:1.2.3.4:80:90'],
    { error: 'Invalid ip address ::ffff:1.2.3.4: address ::ffff:1.2.3.4:: too many colons in address' },
  ],
  [['EXPOSE [::ffff:1.2.3.4]:80:90'], { config: { ExposedPorts: { '90/tcp': {} } } }],
  [['VOLUME ["/a"] x'], { config: { Volumes: { '/a': {} } } }],
  [['CMD ["a" , "b"]  # c'], { config: { Cmd: ['a', 'b'] } }],
  [['CMD ["a"]\t'], { config: { Cmd: ['a'] } }],
  [['ONBUILD  ONBUILD x'], { error: "Chaining ONBUILD via `ONBUILD ONBUILD` isn't allowed" }],
  [['ONBUILD "RUN" x'], { config: { OnBuild: ['"RUN" x'] } }],
  [['ONBUILD --x'], { error: 'ONBUILD requires at least one argument' }],
  [['USER --x=1'], { error: 'USER requires exactly one argument' }],
  [['USER --x=1 a'], { error: 'Unknown flag: x' }],
  [['ENV --x=1'], { error: 'Unknown flag: x' }],
  [['EXPOSE --x=1'], { error: 'EXPOSE requires at least one argument' }],
  [['VOLUME --x=1 /a'], { error: 'Unknown flag: x' }],
  [['LABEL --x'], { error: 'Unknown flag: x' }],
  [['WORKDIR --x="a b" c'], { error: 'Unknown flag: x' }],
  [['HEALTHCHECK --interval=1s --interval=1s NONE'], { config: { Healthcheck: { Test: ['NONE'] } } }],
  [['HEALTHCHECK --x NONE'], { config: { Healthcheck: { Test: ['NONE'] } } }],
  [
    ['HEALTHCHECK NONE', 'HEALTHCHECK --retries=3 CMD x'],
    { config: { Healthcheck: { Test: ['CMD-SHELL', 'x'], Retries: 3 } } },
  ],
  [['CMD "--foo" x'], { config: { Cmd: ['/bin/sh', '-c', '"--foo" x'] } }],
  [['CMD -x'], { config: { Cmd: ['/bin/sh', '-c', '-x'] } }],
  [['CMD --foo\\ bar x'], { error: 'Unknown flag: foo bar' }],
  [["CMD --'a b'=c x"], { error: 'Unknown flag: a b' }],
  [['CMD --a"=" x'], { error: 'Unknown flag: a' }],
  [['CMD --"" x'], { config: { Cmd: ['/bin/sh', '-c', 'x'] } }],
  [['CMD --a=b'], { error: 'Unknown flag: a' }],
  [['CMD x --a=b'], { config: { Cmd: ['/bin/sh', '-c', 'x --a=b'] } }],
  [['ENV A="a b"  C=d', 'LABEL l=$A'], { config: { Env: ['A=a b', 'C=d'], Labels: { l: 'a b' } } }],
  [['ENV A=1', 'ENV A'], { error: 'ENV must have two arguments' }],
  [['EXPOSE 80', 'EXPOSE 81/udp'], { config: { ExposedPorts: { '80/tcp': {}, '81/udp': {} } } }],
  [['VOLUME /a', 'VOLUME /b'], { config: { Volumes: { '/a': {}, '/b': {} } } }],
  [['ENV PATH=/usr/bin', 'ENV PATH=$PATH:/x'], { config: { Env: ['PATH=/usr/bin:/x'] } }],
  [['onbuild\tRUN x'], { config: { OnBuild: ['RUN x'] } }],
  [[' \t ONBUILD RUN x'], { config: { OnBuild: ['RUN x'] } }],
  [['ONBUILD\u00a0RUN x'], { error: 'onbuild\u00a0run is not a valid change command' }],
  [['EXPOSE 80 \\', '  # hi', '  90'], { config: { ExposedPorts: { '80/tcp': {}, '90/tcp': {} } } }],
  [['\u00a0USER a'], { config: { User: 'a' } }],
  [['USER a\u000b'], { config: { User: 'a' } }],
  [['USER\u000ba'], { config: { User: 'a' } }],
  [['USER\fa'], { config: { User: 'a' } }],
  [['CMD ["a",\n"b"]'], { error: '"b"] is not a valid change command' }],
  [['CMD ["a", \\', '"b"]'], { config: { Cmd: ['a', 'b'] } }],
];

/** The config as `docker inspect` shows it, empty fields left out (ExposedPorts is omitempty). */
function shown(config: ContainerConfig): ContainerConfig {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(config)) {
    if (v === null || v === undefined || v === '') continue;
    if (k === 'ExposedPorts' && Object.keys(v as object).length === 0) continue;
    out[k] = v;
  }
  return out as ContainerConfig;
}

describe('import/commit changes', () => {
  it('answers as dockerd 20.10 does', () => {
    for (const [changes, want] of DOCKERD) {
      const label = JSON.stringify(changes);
      if ('error' in want) {
        assert.throws(
          () => applyChanges({}, changes),
          (err: unknown) => {
            assert.equal((err as { kind?: string }).kind, 'InvalidParameter', label);
            assert.equal((err as Error).message, want.error, label);
            return true;
          },
          label,
        );
      } else {
        assert.deepEqual(shown(applyChanges({}, changes)), want.config, label);
      }
    }
  });

  it('leaves the config alone without changes, but refuses an empty one', () => {
    const base: ContainerConfig = { Env: ['A=1'], Cmd: ['x'] };
    assert.deepEqual(applyChanges(base, []), base);
    assert.notEqual(applyChanges(base, []), base);
    assert.throws(() => applyChanges(base, ['']), { message: 'file with no instructions' });
    assert.throws(() => applyChanges(base, ['', '  ', '# c']), { message: 'file with no instructions' });
  });

  it('works on a copy of the base config and sees its environment', () => {
    const base: ContainerConfig = {
      Env: ['HOME=/root', 'P=8080', 'A=1'],
      Cmd: ['old'],
      WorkingDir: '/srv',
      Labels: { keep: 'me' },
      ExposedPorts: { '22/tcp': {} },
    };
    const before = structuredClone(base);
    const c = applyChanges(base, [
      'ENV A=2 B=$A',
      'WORKDIR app',
      'LABEL home=$HOME',
      'EXPOSE $P',
      'ENTRYPOINT ["/init"]',
    ]);
    assert.deepEqual(base, before);
    assert.deepEqual(c.Env, ['HOME=/root', 'P=8080', 'A=2', 'B=1']);
    assert.equal(c.WorkingDir, '/srv/app');
    assert.deepEqual(c.Labels, { keep: 'me', home: '/root' });
    assert.deepEqual(c.ExposedPorts, { '22/tcp': {}, '8080/tcp': {} });
    assert.deepEqual(c.Entrypoint, ['/init']);
    assert.equal(c.Cmd, null, 'ENTRYPOINT without CMD resets the inherited CMD');
  });

  it('uses the config shell for the shell form and clears ArgsEscaped', () => {
    const c = applyChanges({ Shell: ['/bin/bash', '-xc'], ArgsEscaped: true }, ['CMD echo hi']);
    assert.deepEqual(c.Cmd, ['/bin/bash', '-xc', 'echo hi']);
    assert.equal(c.ArgsEscaped, undefined);
  });

  it('refuses lines of 64KiB or more, as the Dockerfile scanner does', () => {
    const fill = (n: number) => `ENV A=${'x'.repeat(n - 'ENV A='.length)}`;
    assert.throws(() => applyChanges({}, [fill(70000)]), { message: 'file with no instructions' });
    assert.throws(() => applyChanges({}, ['USER a', fill(65536)]), {
      message: 'dockerfile line greater than max allowed size of 65535',
    });
    assert.throws(() => applyChanges({}, [`USER a\n${fill(65535)}\r`]), {
      message: 'dockerfile line greater than max allowed size of 65535',
    });
    assert.equal(applyChanges({}, ['USER a', fill(65535)]).Env?.[0]?.length, 65535 - 'ENV '.length);
  });

  it('parses like the Dockerfile parser', () => {
    const { nodes, escapeToken } = parseDockerfile('# escape=`\n# c\nENV a=1 `\n  b=2\n\nonbuild RUN x');
    assert.equal(escapeToken, '`');
    assert.deepEqual(
      nodes.map((n) => [n.value, n.args]),
      [
        ['env', ['a', '1', 'b', '2']],
        ['onbuild', ['run', 'x']],
      ],
    );
  });

  it('lexes words like the Dockerfile shell lexer', () => {
    assert.deepEqual(processWords(`a 'b c' "d $X" \\e`, ['X=1']), ['a', 'b c', 'd 1', 'e']);
    assert.deepEqual(processWords('$V x', ['V=80 443']), ['80', '443', 'x']);
    assert.equal(processWord('a  "b  c"  $V', ['V=1']), 'a  b  c  1');
    assert.equal(processWord('${U:-dflt} ${X:+alt} ${X?} $1 $', ['X=1']), 'dflt alt 1  $');
    assert.equal(processWord('a`$b', [], '`'), 'a$b');
    assert.throws(() => processWord('${A:?nope}', []), {
      message: 'failed to process "${A:?nope}": A: nope',
    });
  });

  it('parses Go durations and quotes as Go does', () => {
    assert.equal(parseGoDuration('1m30s'), 90e9);
    assert.equal(parseGoDuration('250ms'), 250e6);
    assert.equal(parseGoDuration('1.5h'), 5400e9);
    assert.equal(parseGoDuration('-2us'), -2000);
    assert.equal(parseGoDuration('0'), 0);
    assert.throws(() => parseGoDuration('5'), { message: 'time: missing unit in duration "5"' });
    assert.throws(() => parseGoDuration('xyz'), { message: 'time: invalid duration "xyz"' });
    assert.throws(() => parseGoDuration('1d'), { message: 'time: unknown unit "d" in duration "1d"' });
    assert.throws(() => parseGoDuration('3000000h'), { message: 'time: invalid duration "3000000h"' });
    assert.equal(goQuote('a"b\\c\n\u0001\u00a0é'), '"a\\"b\\\\c\\n\\x01\\u00a0é"');
  });
});
