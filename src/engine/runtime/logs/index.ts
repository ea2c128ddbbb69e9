export { MAX_MESSAGE, RecordAssembler } from './assembler.js';
export { compressLog, lastEntryTime } from './compress.js';
export { LogCopier, type LogCopierOptions } from './copier.js';
export { decodeEntry, JsonEntryEncoder } from './json-file.js';
export { JsonLogWriter } from './json-writer.js';
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
  MONITOR_LOG_FLOOR,
  monitorLogSizeMax,
  parseLogLimits,
  parseSize,
  rotateFiles,
} from './rotate.js';
