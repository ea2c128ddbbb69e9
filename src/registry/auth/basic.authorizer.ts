import type { IncomingMessage } from 'node:http';
import { unauthorized } from '../../common/errors.js';
import type { Access, Authorizer, Grant } from './authorizer.js';
import { type Htpasswd, parseBasicAuth } from './htpasswd.js';
import { quoteParam } from './scope.js';

/**
 * HTTP Basic authentication against an htpasswd file, as the reference registry's `htpasswd`
 * auth: any valid user may do anything; missing or wrong credentials get 401 with
 * `WWW-Authenticate: Basic realm="<realm>"`.
 */
export class BasicAuthorizer implements Authorizer {
  readonly challenge: string;

  constructor(
    readonly realm: string,
    readonly htpasswd: Htpasswd,
  ) {
    this.challenge = `Basic realm=${quoteParam(realm)}`;
  }

  async authorize(req: IncomingMessage, _access: Access[]): Promise<Grant> {
    const creds = parseBasicAuth(req.headers.authorization);
    if (!creds) throw unauthorized('authentication required', { challenge: this.challenge });
    if (!(await this.htpasswd.verify(creds.user, creds.password))) {
      throw unauthorized('invalid username or password', { challenge: this.challenge });
    }
    return { user: creds.user, mayPull: () => true };
  }

  identify(req: IncomingMessage): string | undefined {
    const creds = parseBasicAuth(req.headers.authorization);
    return creds ? this.htpasswd.cachedUser(creds.user, creds.password) : undefined;
  }
}
