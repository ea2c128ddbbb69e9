import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  expandPayload,
  expandTemplate,
  type PayloadFunctions,
  type TemplateContext,
} from '../../../../../src/engine/swarm/agent/templates.js';

const ctx: TemplateContext = {
  Service: { ID: 'svc1', Name: 'web', Labels: { b: '2', a: '1' } },
  Node: { ID: 'node1', Hostname: 'host-a', Platform: { OS: 'linux', Architecture: 'x86_64' } },
  Task: { ID: 'task1', Name: 'web.3.task1', Slot: '3' },
};

const fns: PayloadFunctions = {
  env: (n) => ({ HOME: '/root', EMPTY: '' })[n] ?? '',
  secret: (t) => {
    if (t === 'db_pass') return 's3cret';
    throw new Error(`secret target ${t} not found`);
  },
  config: (t) => {
    if (t === 'base.conf') return 'port=80';
    throw new Error(`config target ${t} not found`);
  },
};

const payload = (s: string) => expandPayload(s, ctx, fns);

describe('swarm templates (Go text/template as swarmkit uses it)', () => {
  it('expands every placeholder of swarmkit’s context', () => {
    assert.equal(
      expandTemplate(
        '{{.Service.ID}} {{.Service.Name}} {{.Service.Labels}} {{.Node.ID}} {{.Node.Hostname}} {{.Node.Platform.OS}} {{.Node.Platform.Architecture}} {{.Task.ID}} {{.Task.Name}} {{.Task.Slot}}',
        ctx,
      ),
      'svc1 web map[a:1 b:2] node1 host-a linux x86_64 task1 web.3.task1 3',
    );
    assert.equal(expandTemplate('{{index .Service.Labels "a"}}/{{.Service.Labels.b}}', ctx), '1/2');
    assert.equal(expandTemplate('{{.Node.Platform}}', ctx), '{x86_64 linux}');
    assert.equal(expandTemplate('plain text', ctx), 'plain text');
  });

  it('calls env, secret, config and join in a payload', () => {
    assert.equal(
      payload('home={{env "HOME"}} unset=[{{env "NOPE"}}] pass={{secret "db_pass"}}\n{{config "base.conf"}}'),
      'home=/root unset=[] pass=s3cret\nport=80',
    );
    assert.equal(payload('{{join "," "a" "b" .Task.Slot}}'), 'a,b,3');
    assert.equal(payload('{{"x" | printf "%s-%s" .Service.Name}}'), 'web-x');
  });

  it('handles trimming, comments, if/else, with and range as Go does', () => {
    assert.equal(payload('a  {{- /* gone */ -}}  b'), 'ab');
    assert.equal(
      payload('{{if eq .Task.Slot "3"}}three{{else if .Task.ID}}other{{else}}none{{end}}'),
      'three',
    );
    assert.equal(payload('{{if not (env "EMPTY")}}empty{{end}}'), 'empty');
    assert.equal(payload('{{with .Node}}{{.Hostname}}{{end}}'), 'host-a');
    assert.equal(payload('{{range $k, $v := .Service.Labels}}{{$k}}={{$v}};{{end}}'), 'a=1;b=2;');
    assert.equal(payload('{{range .Service.Labels}}[{{.}}]{{end}}'), '[1][2]');
    assert.equal(payload('{{len .Service.Labels}} {{print 1 2 "x"}}'), '2 1 2x');
    assert.equal(payload('{{$n := .Service.Name}}<{{$n}}> {{$.Task.ID}}'), '<web> task1');
  });

  it('fails with Go’s messages: a missing reference, an unknown field or key, a syntax error', () => {
    assert.throws(
      () => payload('x={{secret "other"}}'),
      (e: Error) =>
        e.message ===
        'template: expansion:1:4: executing "expansion" at <secret "other">: error calling secret: secret target other not found',
    );
    assert.throws(() => payload('{{config "nope"}}'), /error calling config: config target nope not found/);
    assert.throws(
      () => payload('a\n{{.Service.Nope}}'),
      /template: expansion:2:2: executing "expansion" at <.Service.Nope>: can't evaluate field Nope in type struct/,
    );
    assert.throws(() => payload('{{.Service.Labels.zz}}'), /map has no entry for key "zz"/);
    assert.throws(() => payload('{{.Service.Name'), /: template: expansion:1: unclosed action$/);
    assert.throws(() => payload('{{foo "x"}}'), /template: expansion:1: function "foo" not defined/);
    assert.throws(() => payload('{{if .Task.ID}}x'), /unexpected EOF/);
    assert.throws(() => payload('{{end}}'), /unexpected \{\{end\}\}/);
    // the spec-field templates have no payload functions
    assert.throws(() => expandTemplate('{{env "HOME"}}', ctx), /function "env" not defined/);
  });
});
