/* Shared objects that are not usable ncclNet plugins: FAKE_V6 exports only
 * an ncclNetPlugin_v6 table (too old), otherwise no plugin symbol at all. */
#define EXPORT __attribute__((visibility("default")))

#ifdef FAKE_V6
/* Only the symbol matters: the loader must refuse it by version. */
EXPORT const struct {
  const char *name;
  void *fns[16];
} ncclNetPlugin_v6 = {"fake_v6", {0}};
#else
EXPORT int fake_not_a_plugin(void) {
  return 0;
}
#endif
