export {
  dockerTime,
  formatRecord,
  type Instant,
  type LogStream,
  parseInstant,
  parseRecord,
} from './k8s-file.js';
export { type LogMessage, type ReadLogsOptions, readLogBatches, readLogs } from './read.js';
export {
  type LogLimits,
  LogRotationWatcher,
  logNeedsRotation,
  monitorLogSizeMax,
  parseLogLimits,
  parseSize,
  rotateLog,
  rotateLogIfNeeded,
} from './rotate.js';
