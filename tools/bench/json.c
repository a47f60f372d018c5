/* --json: the whole sweep as one JSON document, written when the sweep ends
 * (also after a failure, with "error" set). The schema ("tpx-bench/1") is in
 * docs/API.md; tests/tools/check_bench_json.py validates it. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

FILE *bench_json_stdout; /* --json -: the real stdout (main moves the table to stderr) */

static void jstr(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

static void jnum(FILE *f, double v) {
  if (isfinite(v)) fprintf(f, "%.6g", v);
  else fputs("null", f);
}

static void header(FILE *f, const struct bench_json_ctx *c) {
  const struct bench_opts *o = c->o;
  char host[256] = "", date[32] = "";
  gethostname(host, sizeof(host) - 1);
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
  fprintf(f, "{\n  \"schema\": \"tpx-bench/1\",\n  \"date\": \"%s\",\n  \"host\": ", date);
  jstr(f, host);
  fprintf(f, ",\n  \"command\": [");
  for (int i = 0; i < c->argc; i++) {
    if (i) fputs(", ", f);
    jstr(f, c->argv[i]);
  }
  fprintf(f, "],\n  \"config\": {\"mode\": \"%s\", \"transport\": ",
          o->mode == BENCH_LOOPBACK ? "loopback" : o->mode == BENCH_CLIENT ? "client" : "server");
  jstr(f, c->transport ? c->transport : "");
  fprintf(f,
          ", \"mem\": \"%s\", \"gpu\": %d, \"gpus\": %d, \"channels\": %d, \"chunk_bytes\": %zu, \"iters\": %d, "
          "\"warmup\": %d, \"inflight\": %d, \"regions\": %d, \"check\": %s, \"latency\": %s, "
          "\"cpus\": %ld},\n",
          o->cuda ? "cuda" : "host", o->gpu, o->ngpus, c->channels, c->chunk, o->iters, o->warmup, o->inflight,
          o->regions, o->check ? "true" : "false", o->latency ? "true" : "false", sysconf(_SC_NPROCESSORS_ONLN));
  fputs("  \"error\": ", f);
  if (c->error) jstr(f, c->error);
  else fputs("null", f);
  fputs(",\n", f);
}

static void run(FILE *f, const struct bench_result *r) {
  fprintf(f, "    {\"op\": \"%s\", \"block_bytes\": %zu, \"batch\": %d, \"bytes\": %zu, \"chunk_bytes\": %zu, "
             "\"iters\": %d, \"ok\": %d, \"errors\": %d, \"checked\": %d,\n     \"time_us\": ",
          bench_op_name(r->op), r->block, r->batch, r->bytes, r->chunk, r->iters, r->ok, r->errors, r->checked);
  if (r->ok) jnum(f, r->avg_us);
  else fputs("null", f);
  fputs(", \"gbps_per_gpu\": ", f);
  if (r->ok && !r->latency) jnum(f, r->gbps_gpu);
  else fputs("null", f);
  fputs(", \"gbps_total\": ", f);
  if (r->ok && !r->latency) jnum(f, r->gbps_total);
  else fputs("null", f);
  fputs(",\n     \"latency_us\": ", f);
  if (r->ok) {
    double v[5] = {r->min_us, r->p50_us, r->p99_us, r->p999_us, r->max_us};
    const char *k[5] = {"min", "p50", "p99", "p99.9", "max"};
    fputc('{', f);
    for (int i = 0; i < 5; i++) {
      fprintf(f, "%s\"%s\": ", i ? ", " : "", k[i]);
      jnum(f, v[i]);
    }
    fputc('}', f);
  } else {
    fputs("null", f);
  }
  fputs(", \"error\": ", f);
  if (r->error[0]) jstr(f, r->error);
  else fputs("null", f);
  if (r->npairs) { /* --gpus: each pair's own figures */
    fputs(",\n     \"pairs\": [", f);
    for (int i = 0; i < r->npairs; i++) {
      fprintf(f, "%s{\"gpu\": %d, \"ok\": %d, \"errors\": %d, \"gbps\": ", i ? ", " : "", r->pair[i].gpu, r->pair[i].ok,
              r->pair[i].errors);
      if (r->pair[i].ok && !r->latency) jnum(f, r->pair[i].gbps);
      else fputs("null", f);
      fputc('}', f);
    }
    fputc(']', f);
  }
  fputs("}", f);
}

int bench_json_write(const struct bench_json_ctx *c, const struct bench_result *r, int n) {
  int to_stdout = !strcmp(c->o->json, "-");
  if (to_stdout && !bench_json_stdout) return -1;
  FILE *f = to_stdout ? bench_json_stdout : fopen(c->o->json, "w");
  if (!f) {
    perror(c->o->json);
    return -1;
  }
  header(f, c);
  fputs("  \"runs\": [\n", f);
  for (int i = 0; i < n; i++) {
    run(f, &r[i]);
    fputs(i + 1 < n ? ",\n" : "\n", f);
  }
  fputs("  ]\n}\n", f);
  int rc = ferror(f) ? -1 : 0;
  if (to_stdout ? fflush(f) != 0 : fclose(f) != 0) rc = -1;
  return rc;
}
