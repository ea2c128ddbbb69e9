/** berth's version, reported by `berth version`, the engine's /version and the Server header. */
export const BERTH_VERSION = '0.1.0';
