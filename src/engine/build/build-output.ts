/** One message of a build's answer, as dockerd writes it (jsonmessage). */
export type BuildMessage =
  | { stream: string }
  | { aux: { ID: string } }
  | { status: string; id?: string; progressDetail?: { current?: number; total?: number } }
  | { errorDetail: { code?: number; message: string }; error: string }
  /** The end of a progress (dockerd writes an empty message after `Downloading context`). */
  | { [k: string]: never };

/** Where the messages go (the route's JSON message stream). */
export type MessageSink = (m: BuildMessage) => void;

/** dockerd's colour of a build step's stderr (streamformatter's stderr writer). */
const STDERR_ON = '\u001b[91m';
const STDERR_OFF = '\u001b[0m';

const short = (id: string): string => id.replace(/^sha256:/, '').slice(0, 12);

/**
 * The classic builder's output: `Step N/M : …`, ` ---> Running in …`, the steps' output (stderr
 * in red), ` ---> Using cache`, ` ---> <id>`, `Removing intermediate container …`, the
 * `{"aux":{"ID":…}}` message per stage, `Successfully built/tagged`. Quiet (`q`): held back, and
 * only given when the build fails (then the error); a success shows the ID alone.
 */
export class BuildOutput {
  private held: BuildMessage[] = [];

  constructor(
    private readonly sink: MessageSink,
    private readonly quiet: boolean,
  ) {}

  private emit(m: BuildMessage): void {
    if (this.quiet) this.held.push(m);
    else this.sink(m);
  }

  /** A message of a lane (OutputLanes): as this output's own (quiet holds it, and drops aux). */
  forward(m: BuildMessage): void {
    if (this.quiet && 'aux' in m) return;
    this.emit(m);
  }

  text(s: string): void {
    this.emit({ stream: s });
  }

  step(n: number, total: number, original: string): void {
    this.text(`Step ${n}/${total} : ${original}`);
    this.text('\n');
  }

  runningIn(containerId: string): void {
    this.text(` ---> Running in ${short(containerId)}\n`);
  }

  usingCache(): void {
    this.text(' ---> Using cache\n');
  }

  image(id: string): void {
    this.text(` ---> ${short(id)}\n`);
  }

  removing(containerId: string): void {
    this.text(`Removing intermediate container ${short(containerId)}\n`);
  }

  warning(text: string): void {
    this.text(` ---> [Warning] ${text}\n`);
  }

  /** A step's output, as it comes. */
  output(stream: 'stdout' | 'stderr', data: Buffer): void {
    const s = data.toString('utf8');
    this.text(stream === 'stderr' ? `${STDERR_ON}${s}${STDERR_OFF}` : s);
  }

  /** A pull's progress (FROM an image that is not here, or `pull`). */
  progress(status: string, id?: string, detail?: { current?: number; total?: number }): void {
    const m: BuildMessage = { status };
    if (id !== undefined) m.id = id;
    // the route renders the `progress` bar of a detail with a current
    if (detail) m.progressDetail = detail;
    this.emit(m);
  }

  /** The image a stage made (the CLI takes the last for --iidfile). */
  aux(id: string): void {
    if (!this.quiet) this.sink({ aux: { ID: id } });
  }

  /** The end of a successful build. */
  success(id: string, tags: string[], unusedArgs: string[]): void {
    if (unusedArgs.length)
      this.text(`[Warning] One or more build-args [${unusedArgs.join(' ')}] were not consumed\n`);
    if (this.quiet) {
      this.sink({ stream: `${id}\n` });
      return;
    }
    this.text(`Successfully built ${short(id)}\n`);
    for (const t of tags) this.text(`Successfully tagged ${t}\n`);
  }

  /** A failure after the answer started: what quiet held back, then the error. */
  failure(message: string, code?: number): void {
    for (const m of this.held) this.sink(m);
    this.held = [];
    this.sink({ errorDetail: code === undefined ? { message } : { code, message }, error: message });
  }
}

/**
 * The lanes of stages that run at once: each stage writes to its own lane; the client gets lane
 * 0 as it comes, the others held until every lane before them is done (then flushed, and live
 * from then on). After a failed lane nothing more is shown: the build ends with its error.
 */
export class OutputLanes {
  private current = 0;
  private readonly held: BuildMessage[][];
  private readonly state: Array<'running' | 'done' | 'failed'>;

  constructor(
    private readonly root: BuildOutput,
    count: number,
  ) {
    this.held = Array.from({ length: count }, () => []);
    this.state = Array.from({ length: count }, () => 'running');
  }

  lane(n: number): BuildOutput {
    return new BuildOutput((m) => this.write(n, m), false);
  }

  private write(n: number, m: BuildMessage): void {
    if (n === this.current) this.root.forward(m);
    else (this.held[n] as BuildMessage[]).push(m);
  }

  /** A stage is done: its image's aux message, then the next lanes' turn. */
  done(n: number, imageId: string): void {
    this.write(n, { aux: { ID: imageId } });
    this.state[n] = 'done';
    this.advance();
  }

  failed(n: number): void {
    this.state[n] = 'failed';
    this.advance();
  }

  private advance(): void {
    while (this.current < this.state.length && this.state[this.current] === 'done') {
      this.current++;
      this.flush(this.current);
    }
  }

  private flush(n: number): void {
    const held = this.held[n];
    if (!held) return;
    for (const m of held) this.root.forward(m);
    held.length = 0;
  }
}
