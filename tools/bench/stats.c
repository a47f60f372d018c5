/* Per-run statistics from the successful iterations only: a failed iteration
 * is counted as an error and never averaged in. Percentiles are nearest-rank
 * (the smallest time at or above that fraction of the iterations). */
#include <math.h>
#include <stdlib.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double rank(const double *s, int n, double q) {
  int k = (int)ceil(q * n);
  if (k < 1) k = 1;
  return s[k > n ? n - 1 : k - 1];
}

/* div: 2 for ping-pong (one-way = round trip / 2), else 1. */
void bench_stats(struct bench_result *r, double *t_ms, int n, int ngpus, double div) {
  r->ok = n;
  if (n <= 0) return;
  qsort(t_ms, (size_t)n, sizeof(double), cmp_double);
  double sum = 0;
  for (int i = 0; i < n; i++) sum += t_ms[i];
  double us = 1e3 / div;
  r->avg_us = sum / n * us;
  r->min_us = t_ms[0] * us;
  r->p50_us = rank(t_ms, n, 0.50) * us;
  r->p99_us = rank(t_ms, n, 0.99) * us;
  r->p999_us = rank(t_ms, n, 0.999) * us;
  r->max_us = t_ms[n - 1] * us;
  if (!r->latency && sum > 0) {
    r->gbps_gpu = (double)r->bytes * n / (sum * 1e-3) / 1e9;
    r->gbps_total = r->gbps_gpu * ngpus;
  }
}
