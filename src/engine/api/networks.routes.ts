import { isIP } from 'node:net';
import type { EndpointSettings } from '../../common/docker-types.js';
import { invalidParameter, isKind } from '../../common/errors.js';
import { goParseBool, parseBoolError } from '../../common/go-strconv.js';
import { readJsonObject } from '../../http/body.js';
import { parseFilters } from '../../http/query.js';
import { sendJson } from '../../http/server.js';
import type { ContainerService } from '../containers/service.types.js';
import type { NetworkService } from '../network/network.service.js';
import type { SwarmNetworkRequest } from '../swarm/networks/network.types.js';
import type { SwarmNetworks } from '../swarm/networks/swarm-networks.js';
import type { ApiRouter } from './context.js';
import { gates, versionAtLeast, versionBefore } from './versions.js';

/** What the routes need from the network layer (src/engine/network). */
export type NetworkBackend = Pick<NetworkService, 'list' | 'inspect' | 'create' | 'remove' | 'prune'>;

/** Swarm-scope (overlay) networks, on a manager (src/engine/swarm/networks). */
export type SwarmNetworkBackend = Pick<SwarmNetworks, 'list' | 'find' | 'create' | 'remove'>;

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
  swarm?: SwarmNetworkBackend,
): void {
  router.get('/networks', async (ctx) => {
    const filters = parseFilters(ctx.query.get('filters'));
    // the local listing checks the filters' names first
    const list: Array<Record<string, unknown>> = networks.list(filters);
    if (swarm) for (const n of await swarm.list(filters)) list.push({ ...n });
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
    const ref = ctx.params.id ?? '';
    const scope = ctx.query.get('scope') || undefined;
    let view: Record<string, unknown>;
    try {
      view = networks.inspect(ref, { scope });
    } catch (err) {
      // a local network first, as dockerd looks; then the swarm's
      if (!swarm || !isNotFound(err) || (scope && scope !== 'swarm')) throw err;
      const found = await swarm.find(ref);
      if (!found) throw err;
      view = { ...found };
    }
    sendJson(ctx.res, 200, shapeNetworkInspect(view, ctx.version));
  });

  router.post('/networks/create', async (ctx) => {
    const body = await readJsonObject(ctx.req);
    if (swarm && body.Driver === 'overlay') {
      sendJson(ctx.res, 201, await swarm.create(swarmNetworkRequest(body)));
      return;
    }
    sendJson(ctx.res, 201, await networks.create(body));
  });

  router.delete('/networks/{id}', async (ctx) => {
    const ref = ctx.params.id ?? '';
    try {
      await networks.remove(ref);
    } catch (err) {
      if (!swarm || !isNotFound(err)) throw err;
      await swarm.remove(ref);
    }
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

function isNotFound(err: unknown): boolean {
  return isKind(err, 'NotFound');
}

/** A create body for an overlay network, its fields checked for their types. */
function swarmNetworkRequest(body: Record<string, unknown>): SwarmNetworkRequest {
  const bool = (v: unknown, field: string): boolean => {
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') throw invalidParameter(`${field} must be a boolean`);
    return v;
  };
  const strings = (v: unknown, field: string): Record<string, string> | null => {
    if (v === undefined || v === null) return null;
    if (typeof v !== 'object' || Array.isArray(v) || Object.values(v).some((x) => typeof x !== 'string'))
      throw invalidParameter(`${field} must be an object of strings`);
    return { ...(v as Record<string, string>) };
  };
  if (typeof body.Name !== 'string') throw invalidParameter('Name must be a string');
  const req: SwarmNetworkRequest = {
    Name: body.Name,
    Driver: 'overlay',
    Attachable: bool(body.Attachable, 'Attachable'),
    Ingress: bool(body.Ingress, 'Ingress'),
    Internal: bool(body.Internal, 'Internal'),
    EnableIPv6: bool(body.EnableIPv6, 'EnableIPv6'),
    Labels: strings(body.Labels, 'Labels'),
    Options: strings(body.Options, 'Options'),
  };
  const ipam = body.IPAM;
  if (ipam !== undefined && ipam !== null) {
    if (typeof ipam !== 'object' || Array.isArray(ipam)) throw invalidParameter('IPAM must be an object');
    const i = ipam as Record<string, unknown>;
    const config = i.Config;
    if (config !== undefined && config !== null && !Array.isArray(config))
      throw invalidParameter('IPAM.Config must be an array');
    req.IPAM = {
      Driver: typeof i.Driver === 'string' ? i.Driver : '',
      Options: strings(i.Options, 'IPAM.Options'),
      Config: ((config as unknown[] | null | undefined) ?? []).map((c) => {
        if (!c || typeof c !== 'object') throw invalidParameter('IPAM.Config entries must be objects');
        const e = c as Record<string, unknown>;
        const text = (v: unknown) => (typeof v === 'string' ? v : undefined);
        return { Subnet: text(e.Subnet), IPRange: text(e.IPRange), Gateway: text(e.Gateway) };
      }),
    };
  }
  return req;
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
