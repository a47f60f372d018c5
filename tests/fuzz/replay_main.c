/* The plain build's driver of a fuzz harness: feeds every file named on the
 * command line (a directory: every file in it) to LLVMFuzzerTestOneInput,
 * once each, so the checked-in corpora replay under ctest with gcc and
 * ASan+UBSan too. libFuzzer builds (TPX_FUZZ=ON) use libFuzzer's main
 * instead. Exit status 0 when every input ran; a harness that finds a broken
 * invariant aborts, as it would under libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#define REPLAY_MAX_BYTES                                                                           \
  (1u << 20) /* corpus files are small; libFuzzer's default max_len is 4 KiB */

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: %s: cannot open\n", path);
    return -1;
  }
  uint8_t *buf = malloc(REPLAY_MAX_BYTES);
  size_t n = buf ? fread(buf, 1, REPLAY_MAX_BYTES, f) : 0;
  int big = buf && n == REPLAY_MAX_BYTES && fgetc(f) != EOF;
  fclose(f);
  if (!buf || big) {
    fprintf(stderr, "replay: %s: %s\n", path, buf ? "larger than 1 MiB" : "out of memory");
    free(buf);
    return -1;
  }
  /* An exact-size copy, so ASan sees a read past the input's end. */
  uint8_t *in = malloc(n ? n : 1);
  if (!in) {
    free(buf);
    return -1;
  }
  memcpy(in, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(in, n);
  free(in);
  return 0;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of a directory, in name order (runs are repeatable). */
static int run_dir(const char *dir, int *count) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "replay: %s: cannot open directory\n", dir);
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **t = realloc(names, cap * sizeof(*t));
      if (!t) {
        rc = -1;
        break;
      }
      names = t;
    }
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    if ((names[n] = malloc(len)) == NULL) {
      rc = -1;
      break;
    }
    snprintf(names[n++], len, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  if (n) qsort(names, n, sizeof(*names), cmp_names);
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
      if (run_file(names[i]) != 0)
        rc = -1;
      else
        (*count)++;
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int count = 0, rc = 0;
  for (int i = 1; i < argc && rc == 0; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
      rc = -1;
    } else if (S_ISDIR(st.st_mode)) {
      rc = run_dir(argv[i], &count);
    } else {
      rc = run_file(argv[i]);
      count += rc == 0;
    }
  }
  if (rc == 0 && count == 0) {
    fprintf(stderr, "replay: no inputs\n");
    rc = -1;
  }
  printf("replay: %d input(s) ran\n", count);
  return rc == 0 ? 0 : 1;
}
