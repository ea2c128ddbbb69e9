/** A progress message of a push, as the route writes it in dockerd's JSON form. */
export type PushMessage =
  /** `{"status":...}`: the repository line, `<tag>: digest: ... size: N`. */
  | { kind: 'status'; status: string }
  /** `{"status","progressDetail","id"}` of one layer; `current`/`total` for Pushing. */
  | { kind: 'layer'; id: string; status: string; current?: number; total?: number }
  /** `{"progressDetail":{},"aux":{"Tag","Digest","Size"}}` after each tag. */
  | { kind: 'aux'; tag: string; digest: string; size: number };

export interface PushOptions {
  /** The repository (`127.0.0.1:5000/app`); a tag in it counts as `tag`. */
  name: string;
  /** One tag; all tags of the repository when absent. */
  tag?: string;
  /** Credentials from X-Registry-Auth (moby's AuthConfig). */
  auth: import('../../distribution/types.js').AuthConfig;
  signal?: AbortSignal;
  onMessage(m: PushMessage): void;
}
