/* NUMA placement without libnuma (topo.h): CPU affinity from sysfs cpulists,
 * memory through the set_mempolicy/get_mempolicy system calls. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "topo/topo.h"

#define MPOL_DEFAULT_ 0
#define MPOL_PREFERRED_ 1
#define MAX_CPUS CPU_SETSIZE

int tpx__numa_parse_cpulist(const char *s, unsigned char *cpus, int ncpus) {
  int n = 0;
  memset(cpus, 0, (size_t)ncpus);
  const char *p = s;
  while (*p && *p != '\n') {
    char *end;
    errno = 0;
    long lo = strtol(p, &end, 10), hi = lo;
    if (end == p || errno || lo < 0) return TPX_EINVAL;
    p = end;
    if (*p == '-') {
      hi = strtol(p + 1, &end, 10);
      if (end == p + 1 || errno || hi < lo) return TPX_EINVAL;
      p = end;
    }
    for (long c = lo; c <= hi && c < ncpus; c++)
      if (!cpus[c]) cpus[c] = 1, n++;
    if (*p == ',') p++;
    else if (*p && *p != '\n') return TPX_EINVAL;
  }
  return n;
}

int tpx__numa_bind_thread(const char *sysfs_root, int node) {
  if (node < 0) return TPX_ENOENT;
  char path[512], line[4096];
  snprintf(path, sizeof(path), "%s/devices/system/node/node%d/cpulist", sysfs_root ? sysfs_root : "/sys", node);
  FILE *f = fopen(path, "r");
  if (!f) return TPX_ENOENT;
  char *got = fgets(line, sizeof(line), f);
  fclose(f);
  unsigned char mine[MAX_CPUS];
  if (!got || tpx__numa_parse_cpulist(line, mine, MAX_CPUS) <= 0) return TPX_EINVAL;
  cpu_set_t allowed, want;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return TPX_ESYSTEM;
  CPU_ZERO(&want);
  for (int c = 0; c < MAX_CPUS; c++)
    if (mine[c] && CPU_ISSET(c, &allowed)) CPU_SET(c, &want);
  if (CPU_COUNT(&want) == 0) return TPX_ENOENT; /* the process may not run there: leave it */
  if (sched_setaffinity(0, sizeof(want), &want) != 0) return TPX_ESYSTEM;
  TPX_DEBUG("thread pinned to NUMA node %d (%d CPUs)", node, CPU_COUNT(&want));
  return 0;
}

void tpx__numa_prefer_enter(int node, tpx_numa_pref_t *s) {
  memset(s, 0, sizeof(*s));
  size_t bits = sizeof(s->mask) * 8;
  if (node < 0 || (size_t)node >= bits) return;
  if (syscall(SYS_get_mempolicy, &s->mode, s->mask, bits, NULL, 0UL) != 0) return;
  unsigned long want[16] = {0};
  want[node / (8 * sizeof(long))] = 1UL << (node % (8 * sizeof(long)));
  if (syscall(SYS_set_mempolicy, MPOL_PREFERRED_, want, bits) != 0) return;
  s->active = 1;
}

void tpx__numa_prefer_leave(tpx_numa_pref_t *s) {
  if (!s->active) return;
  size_t bits = sizeof(s->mask) * 8;
  if (syscall(SYS_set_mempolicy, s->mode, s->mode == MPOL_DEFAULT_ ? NULL : s->mask, bits) != 0)
    TPX_DEBUG("set_mempolicy restore: %s", strerror(errno));
  s->active = 0;
}
