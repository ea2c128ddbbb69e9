import { isIP } from 'node:net';
import type { EndpointSettings } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import { goParseBool, parseBoolError } from '../../common/go-strconv.js';
import { readJsonObject } from '../../http/body.js';
import { parseFilters } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import type { ContainerService } from '../containers/service.types.js';
import type { NetworkService } from '../network/network.service.js';
import type { ApiRouter } from './context.js';
import { gates, versionAtLeast, versionBefore } from './versions.js';

/** What the routes need from the network layer (src/engine/network). */
export type NetworkBackend = Pick<NetworkService, 'list' | 'inspect' | 'create' | 'remove' | 'prune'>;

/** What connect and disconnect need from the containers service. */
export type NetworkContainers = Pick<ContainerService, 'connectNetwork' | 'disconnectNetwork'>;

/**
 * A network of GET /networks as the request's version shows it: EnableIPv4 from 1.48, no
 * `Containers` from 1.52 (docker 29's list items are network summaries).
 */
export function shapeNetworkListItem(n: Record<string, unknown>, version: string): Record<string, unknown> {
  const out = { ...n };
  if (versionBefore(version, gates.networkEnableIPv4)) delete out.EnableIPv4;
  if (versionAtLeast(version, gates.networkStatus)) delete out.Containers;
  return out;
}

/** GET /networks/{id} as the request's version shows it: EnableIPv4 from 1.48, Status from 1.52. */
export function shapeNetworkInspect(n: Record<string, unknown>, version: string): Record<string, unknown> {
  const out = { ...n };
  if (versionBefore(version, gates.networkEnableIPv4)) delete out.EnableIPv4;
  if (versionBefore(version, gates.networkStatus)) delete out.Status;
  return out;
}

/** /networks: the predefined networks and user-defined bridge networks (docs/networking.md). */
export function registerNetworkRoutes(
  router: ApiRouter,
  networks: NetworkBackend,
  containers: NetworkContainers,
): void {
  router.get('/networks', async (ctx) => {
    const list = networks.list(parseFilters(ctx.query.get('filters')));
    sendJson(
      ctx.res,
      200,
      list.map((n) => shapeNetworkListItem(n, ctx.version)),
    );
  });

  router.get('/networks/{id}', async (ctx) => {
    // dockerd parses verbose with strconv.ParseBool
    const verbose = ctx.query.get('verbose');
    if (verbose && goParseBool(verbose) === undefined) throw invalidParameter(parseBoolError(verbose));
    const view = networks.inspect(ctx.params.id ?? '', { scope: ctx.query.get('scope') || undefined });
    sendJson(ctx.res, 200, shapeNetworkInspect(view, ctx.version));
  });

  router.post('/networks/create', async (ctx) => {
    const body = await readJsonObject(ctx.req);
    sendJson(ctx.res, 201, await networks.create(body));
  });

  router.delete('/networks/{id}', async (ctx) => {
    await networks.remove(ctx.params.id ?? '');
    ctx.res.writeHead(204).end();
  });

  router.post('/networks/{id}/connect', async (ctx) => {
    const body = await readJsonObject(ctx.req);
    const container = typeof body.Container === 'string' ? body.Container : '';
    if (!container) throw invalidParameter('Container must be given');
    const settings = endpointSettings(body.EndpointConfig);
    await containers.connectNetwork(container, ctx.params.id ?? '', settings);
    ctx.res.writeHead(200).end();
  });

  router.post('/networks/{id}/disconnect', async (ctx) => {
    const body = await readJsonObject(ctx.req);
    const container = typeof body.Container === 'string' ? body.Container : '';
    if (!container) throw invalidParameter('Container must be given');
    await containers.disconnectNetwork(container, ctx.params.id ?? '', body.Force === true);
    ctx.res.writeHead(200).end();
  });

  router.post('/networks/prune', async (ctx) => {
    sendJson(ctx.res, 200, await networks.prune(parseFilters(ctx.query.get('filters'))));
  });
}

/** EndpointConfig of a connect body: the fields a user sets, checked for their types. */
function endpointSettings(v: unknown): EndpointSettings {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalidParameter('EndpointConfig must be an object');
  const e = v as Record<string, unknown>;
  const strings = (x: unknown, field: string): string[] | null => {
    if (x === undefined || x === null) return null;
    if (!Array.isArray(x) || x.some((s) => typeof s !== 'string'))
      throw invalidParameter(`${field} must be strings`);
    return x as string[];
  };
  const out: EndpointSettings = {};
  const ipam = e.IPAMConfig as Record<string, unknown> | null | undefined;
  if (ipam && typeof ipam === 'object') {
    const v4 = typeof ipam.IPv4Address === 'string' ? ipam.IPv4Address : '';
    if (v4 && isIP(v4) !== 4) throw invalidParameter(`invalid IPv4 address: ${v4}`);
    const v6 = typeof ipam.IPv6Address === 'string' ? ipam.IPv6Address : '';
    if (v6 && isIP(v6) !== 6) throw invalidParameter(`invalid IPv6 address: ${v6}`);
    out.IPAMConfig = {
      ...(v4 ? { IPv4Address: v4 } : {}),
      ...(v6 ? { IPv6Address: v6 } : {}),
      ...(Array.isArray(ipam.LinkLocalIPs)
        ? { LinkLocalIPs: strings(ipam.LinkLocalIPs, 'LinkLocalIPs') ?? [] }
        : {}),
    };
  }
  const links = strings(e.Links, 'Links');
  if (links) out.Links = links;
  const aliases = strings(e.Aliases, 'Aliases');
  if (aliases) out.Aliases = aliases;
  if (typeof e.MacAddress === 'string' && e.MacAddress) {
    if (!/^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$/.test(e.MacAddress)) {
      throw invalidParameter(`invalid MAC address: ${e.MacAddress}`);
    }
    out.MacAddress = e.MacAddress;
  }
  if (e.DriverOpts && typeof e.DriverOpts === 'object')
    out.DriverOpts = e.DriverOpts as Record<string, string>;
  return out;
}
