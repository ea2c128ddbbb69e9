/** Secrets and configs as moby's API shows them (api/types/swarm/secret.go, config.go). */

export type ObjectKind = 'secret' | 'config';

export interface Driver {
  Name: string;
  Options?: Record<string, string>;
}

/** SecretSpec and ConfigSpec in one: `Driver` only for secrets, `Data` base64 on the wire. */
export interface ObjectSpec {
  Name: string;
  Labels: Record<string, string>;
  /** Base64. Never shown for a secret. */
  Data?: string;
  Driver?: Driver;
  Templating?: Driver;
}

/** The body of a create or update as decoded (fields may be absent or null). */
export interface ObjectSpecInput {
  Name?: string | null;
  Labels?: Record<string, string> | null;
  Data?: string | null;
  Driver?: Driver | null;
  Templating?: Driver | null;
}

/** A Secret or Config object. */
export interface SwarmObject {
  ID: string;
  Version: { Index: number };
  CreatedAt: string;
  UpdatedAt: string;
  Spec: ObjectSpec;
}

/** What `P/secrets/<id>` and `P/configs/<id>` hold: the object without Version, data sealed. */
export interface StoredObject {
  ID: string;
  CreatedAt: string;
  UpdatedAt: string;
  Spec: Omit<ObjectSpec, 'Data'>;
  /** Private: the data (base64), sealed with the cluster's DEK. */
  _: { data: string };
}
