/* Preloaded by scripts/sanitize address into every process of the run: dlclose does nothing.
 * Open MPI loads its components (and PMIx its plugins) with dlopen and closes them in MPI_Finalize;
 * what they keep until exit is reported by LeakSanitizer after the close, when it can no longer name
 * the library ("<unknown module>"), which no suppression can match. Kept loaded, the reports name
 * the plugin and tests/sanitizers/lsan.supp suppresses them by library. Our own code never dlcloses
 * (cuBLAS and NVML stay open for the life of the process), so nothing of ours is hidden. */
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
