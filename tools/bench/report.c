/* What a person reads: one table per op (a row per size and batch, like
 * nccl-tests), the [PERF] / [CHECK] / [CPU] lines that scripts parse, and a
 * progress line on a terminal. GB = 1e9 bytes. */
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

double bench_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* CPU seconds (user, system) of the whole process, every thread. */
void bench_cpu_now(double *user, double *sys) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  *user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6;
  *sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

/* Where the time goes: CPU per GB moved and how many cores were busy. */
void bench_cpu_line(const char *who, const char *label, double u0, double s0, double wall_ms, double bytes) {
  double u1, s1;
  bench_cpu_now(&u1, &s1);
  if (wall_ms <= 0 || bytes <= 0) return;
  printf("[CPU] %s: %.3f s user + %.3f s system per GB, %.2f cores busy on average (%s)\n", who, (u1 - u0) / (bytes / 1e9),
         (s1 - s0) / (bytes / 1e9), (u1 - u0 + s1 - s0) / (wall_ms * 1e-3), label);
}

const char *bench_chunk_str(size_t chunk, char *buf, size_t n) {
  if (chunk == 0) return "auto";
  snprintf(buf, n, "%zu", chunk);
  return buf;
}

void bench_table_header(const struct bench_opts *o, int op, const char *transport, int channels, size_t chunk) {
  char cb[24];
  printf("#\n# tpx-bench %s: %s memory, transport %s, %d channel(s), chunk %s, %d iters (+%d warm-up), "
         "%d in flight, %d region(s), %d GPU(s), check %s\n",
         bench_op_name(op), o->cuda ? "cuda" : "host", transport, channels, bench_chunk_str(chunk, cb, sizeof cb),
         o->iters, o->warmup, o->inflight,
         o->regions, o->ngpus, o->check ? "every byte" : "off");
  printf("# %s; GB/s = 1e9 B/s; errors = failed iterations (excluded from the figures)\n",
         o->latency ? "times are one-way latencies (round trip / 2; read: the whole read)"
                    : "time = mean per transfer; latency = each transfer from post to completion");
  printf("# %12s %6s %12s %10s %9s %9s %9s %9s %9s %9s %9s %6s\n", "size", "batch", "bytes", "time(us)", "GB/s/GPU",
         "GB/s", "min(us)", "p50(us)", "p99(us)", "p99.9(us)", "max(us)", "errors");
  fflush(stdout);
}

const char *bench_gbps_str(double gbps, char *buf, size_t n) {
  int d = 2; /* decimals: 3 significant digits below 1 GB/s (0.0123), at most 6 */
  for (double lim = 0.1; gbps > 0 && gbps < lim && d < 6; lim /= 10) d++;
  snprintf(buf, n, "%.*f", d, gbps);
  return buf;
}

const char *bench_run_label(int op, size_t block, int batch, char *buf, size_t n) {
  snprintf(buf, n, "%s %zu x %d", bench_op_name(op), block, batch);
  return buf;
}

void bench_table_row(const struct bench_result *r) {
  char g[24], t[24];
  printf("  %12zu %6d %12zu %10.1f %9s %9s %9.1f %9.1f %9.1f %9.1f %9.1f %6d\n", r->block, r->batch, r->bytes,
         r->avg_us, bench_gbps_str(r->gbps_gpu, g, sizeof g), bench_gbps_str(r->gbps_total, t, sizeof t), r->min_us,
         r->p50_us, r->p99_us, r->p999_us, r->max_us, r->errors);
  fflush(stdout);
}

/* The lines scripts have parsed since the first tpx-bench: kept as they were
 * up to the run's label; p50, p99 and the failed transfers follow it. */
void bench_perf_lines(const struct bench_result *r, int ngpus) {
  char g[24], t[24], lb[64];
  bench_run_label(r->op, r->block, r->batch, lb, sizeof lb);
  if (r->error[0]) printf("[ERROR] %s: %s\n", lb, r->error);
  if (r->ok == 0) {
    printf("[PERF] %s: no transfer completed; %d failed; %.3f s in all\n", lb, r->errors, r->wall_ms / 1e3);
    return;
  }
  for (int i = 0; i < r->npairs && !r->latency; i++) /* before the total: scripts take the last BW line */
    printf("[PERF] pair %d (GPU %d): %s GB/s, p50 %.1f us, %d ok, %d error(s)\n", i, r->pair[i].gpu,
           bench_gbps_str(r->pair[i].gbps, g, sizeof g), r->pair[i].p50_us, r->pair[i].ok, r->pair[i].errors);
  if (r->latency) {
    printf("[PERF] Latency (%d iter, %zu B, %s, %s): avg %.2f us, p50 %.2f us, p99 %.2f us\n", r->ok, r->bytes,
           bench_op_name(r->op), r->op == TPX_OP_READ ? "full read round trip" : "one-way = round trip / 2",
           r->avg_us, r->p50_us, r->p99_us);
    return;
  }
  printf("[PERF] Avg (%d iter): %.3f ms, BW: %s GB/s (per GPU; %d GPU(s), %s GB/s total; GB = 1e9 B; %s); "
         "p50 %.3f ms, p99 %.3f ms; %d failed; %.*f s in all\n",
         r->ok, r->avg_us / 1e3, bench_gbps_str(r->gbps_gpu, g, sizeof g), ngpus,
         bench_gbps_str(r->gbps_total, t, sizeof t), lb, r->p50_us / 1e3, r->p99_us / 1e3, r->errors,
         r->wall_ms < 1e3 ? 6 : 3, r->wall_ms / 1e3);
}

void bench_summary_line(const struct bench_result *r, int n, int check) {
  int ok = 0, failed = 0, checked = 0, nbw = 0;
  double bw = 0;
  for (int i = 0; i < n; i++) {
    ok += r[i].ok, failed += r[i].errors, checked += r[i].checked;
    if (!r[i].latency && r[i].ok) bw += r[i].gbps_total, nbw++;
  }
  char g[24];
  printf("[SUMMARY] %d run(s), %d transfer(s) ok, %d failed; bytes checked: %s", n, ok, failed,
         !check ? "no (--check not given)" : checked == ok && ok ? "every byte of every transfer that completed"
                                                                  : "NOT all (see [CHECK] / [ERROR])");
  if (nbw) printf("; average of the runs' GB/s: %s", bench_gbps_str(bw / nbw, g, sizeof g));
  printf("\n");
}

/* On a terminal (or --progress on): one line, rewritten at most 5 times a second. */
void bench_progress(const struct bench_opts *o, const struct bench_result *r, int done, int total, int final) {
  static double last;
  int on = o->progress < 0 ? isatty(STDERR_FILENO) : o->progress;
  if (!on) return;
  if (final) {
    fprintf(stderr, "\r\033[K");
    return;
  }
  double now = bench_now_ms();
  if (now - last < 200 && done < total) return;
  last = now;
  fprintf(stderr, "\r\033[K[%s %zu x %d] iteration %d/%d, %d error(s)", bench_op_name(r->op), r->block, r->batch, done,
          total, r->errors);
}
