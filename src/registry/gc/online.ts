import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import type { OnlineGcConfig } from '../config.js';
import { RegistryError } from '../errors.js';
import type { StorageDriver } from '../storage/driver.js';
import { collectGarbage, type GcReport } from './gc.js';
import type { BlobGuard } from './guard.js';

/** What `POST /berth/gc` answers: the run's counts. */
export interface GcSummary {
  startedAt: string;
  finishedAt: string;
  cutoff: string;
  markedBlobs: number;
  deletedBlobs: number;
  deletedManifests: number;
  deletedLayerLinks: number;
  bytesFreed: number;
  keptYoung: number;
  warnings: string[];
}

export function summarize(r: GcReport): GcSummary {
  return {
    startedAt: r.startedAt.toISOString(),
    finishedAt: r.finishedAt.toISOString(),
    cutoff: r.cutoff.toISOString(),
    markedBlobs: r.markedBlobs,
    deletedBlobs: r.deletedBlobs.length,
    deletedManifests: r.deletedManifests.length,
    deletedLayerLinks: r.deletedLayerLinks.length,
    bytesFreed: r.bytesFreed,
    keptYoung: r.keptYoung.length,
    warnings: r.warnings,
  };
}

/**
 * Garbage collection inside the serving registry (`berth.gc`): scheduled every `interval` and on
 * demand, one run at a time in this process (and, through the storage's lock, on this storage),
 * with the registry's BlobGuard so that no blob a request relies on is deleted under it.
 */
export class OnlineGc {
  private running: Promise<GcReport> | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Completed runs (tests, logs). */
  runs = 0;

  constructor(
    readonly config: OnlineGcConfig,
    private readonly driver: StorageDriver,
    private readonly guard: BlobGuard,
    private readonly log: Logger,
  ) {}

  /** One run now; 503 UNAVAILABLE while another runs (here or in another process on the storage). */
  async run(): Promise<GcReport> {
    if (this.running) throw busy('a garbage collection is already running in this registry');
    this.running = collectGarbage(this.driver, {
      gracePeriodMs: this.config.gracePeriodMs,
      deleteUntagged: this.config.deleteUntagged,
      guard: this.guard,
    });
    try {
      const report = await this.running;
      this.runs++;
      if (report.deletedBlobs.length > 0 || report.deletedManifests.length > 0)
        this.log.info('garbage collected', {
          blobs: report.deletedBlobs.length,
          manifests: report.deletedManifests.length,
          bytes: report.bytesFreed,
        });
      return report;
    } catch (err) {
      if ((err as { kind?: string }).kind === 'Conflict') throw busy(errorMessage(err));
      throw err;
    } finally {
      this.running = undefined;
    }
  }

  /** Start the schedule (nothing when `interval` is 0). */
  start(): void {
    if (this.config.intervalMs <= 0) return;
    this.timer = setInterval(
      () => {
        if (this.running) return;
        this.run().catch((err: unknown) =>
          this.log.warn('scheduled garbage collection failed', { error: errorMessage(err) }),
        );
      },
      Math.max(100, this.config.intervalMs),
    );
    this.timer.unref();
  }

  /** Stop the schedule and wait for a run in progress. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }
}

function busy(message: string): RegistryError {
  return new RegistryError('UNAVAILABLE', message, undefined, 503).withHeaders({ 'Retry-After': '5' });
}
