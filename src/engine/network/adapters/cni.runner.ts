import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { systemError } from '../../../common/errors.js';
import { cniErrorMessage } from '../cni.config.js';

/** One call of a CNI plugin (the CNI_* environment and the network configuration on stdin). */
export interface CniCall {
  command: 'ADD' | 'DEL' | 'CHECK';
  containerId: string;
  /** The network namespace path; '' when there is none any more (DEL then only releases IPAM). */
  netns: string;
  ifname: string;
  /** CNI_ARGS (`K=V;K2=V2`). */
  args?: string;
  config: Record<string, unknown>;
}

/** Runs CNI plugins. Unit tests substitute a fake; the engine runs the binaries directly. */
export interface CniRunner {
  /** The plugin's result (parsed JSON), or undefined when it printed nothing (DEL). */
  exec(plugin: string, call: CniCall): Promise<unknown>;
}

/**
 * Executes the plugins of a CNI bin directory (Debian's containernetworking-plugins install them
 * in /usr/lib/cni): no shell, the configuration on stdin, the result on stdout.
 */
export class HostCniRunner implements CniRunner {
  constructor(private readonly binDir = '/usr/lib/cni') {}

  exec(plugin: string, call: CniCall): Promise<unknown> {
    const env: Record<string, string> = {
      CNI_COMMAND: call.command,
      CNI_CONTAINERID: call.containerId,
      CNI_NETNS: call.netns,
      CNI_IFNAME: call.ifname,
      CNI_PATH: this.binDir,
      // the bridge plugin runs the IPAM plugin (and iptables when asked to masquerade)
      PATH: process.env.PATH || '/usr/sbin:/usr/bin:/sbin:/bin',
    };
    if (call.args) env.CNI_ARGS = call.args;
    return new Promise((resolve, reject) => {
      const child = spawn(join(this.binDir, plugin), [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on('data', (d: Buffer) => out.push(d));
      child.stderr.on('data', (d: Buffer) => {
        if (err.length < 64) err.push(d);
      });
      child.on('error', (e) => reject(systemError(`cannot run the CNI plugin ${plugin}: ${e.message}`)));
      child.stdin.on('error', () => undefined); // EPIPE when the plugin exits early; its status tells
      child.on('close', (code) => {
        const stdout = Buffer.concat(out).toString('utf8');
        if (code !== 0) {
          reject(
            systemError(cniErrorMessage(plugin, call.command, stdout, Buffer.concat(err).toString('utf8'))),
          );
          return;
        }
        if (stdout.trim() === '') return resolve(undefined);
        try {
          resolve(JSON.parse(stdout));
        } catch {
          reject(systemError(`CNI ${plugin} ${call.command}: result is not JSON: ${stdout.slice(0, 200)}`));
        }
      });
      child.stdin.end(JSON.stringify(call.config));
    });
  }
}
