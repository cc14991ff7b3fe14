/**
 * The IMDS client timeout for tests that read a real HTTP IMDS (the simulated one or a
 * server of their own) and are not about timeouts: 30 000 ms. ipamd's own 2 000 ms default
 * failed a unit test at load average 40 (a CI machine running three lanes and a stress
 * pass), where a localhost answer can wait seconds for a CPU.
 */
export const LOADED_MS = 30_000;
