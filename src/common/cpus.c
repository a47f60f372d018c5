/* How many CPUs the defaults are sized by: those this process may run on
 * (its affinity, as taskset, cpusets and container runtimes set it), not
 * every CPU online, so that a process confined to 16 of 32 CPUs gets the
 * threads and sockets of a 16-CPU machine. */
#define _GNU_SOURCE
#include <sched.h>
#include <unistd.h>

#include "common/util.h"

int tpx__cpu_count(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN); /* more than cpu_set_t holds, or no answer */
  return n >= 1 ? (int)n : 1;
}
