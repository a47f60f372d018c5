/* GPU-NIC topology (src/topo) against fake sysfs trees that each test builds
 * in a temporary directory, TPX_GPU_NIC_MAP parsing, and the NUMA helpers.
 *
 * The A3-high tree (docs/TOPOLOGY.md): NICs at the addresses, eth1
 * 0000:06:00.0 and eth2 0000:0c:00.0 on NUMA 0, eth3 0000:86:00.0 and eth4
 * 0000:8c:00.0 on NUMA 1; each behind a PCIe switch shared with two GPUs
 * (GPU 0,1 = 04,05 with eth1; 2,3 = 0a,0b with eth2; 4,5 = 84,85 with eth3;
 * 6,7 = 8a,8b with eth4). The GPU addresses are modelled, not read off a
 * machine. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/gpumap.h"
#include "testutil.h"
#include "topo/topo.h"
#include "tpx/config.h"
#include "tpx/error.h"

/* ---- building fake trees ------------------------------------------------------------ */

static char root[256]; /* mkdtemp under /tmp: short */

static void mkdirs(const char *rel) {
  char p[PATH_MAX];
  snprintf(p, sizeof(p), "%s/%s", root, rel);
  for (char *s = p + strlen(root) + 1; *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST) fail_msg("mkdir %s: %s", p, strerror(errno));
    *s = '/';
  }
  if (mkdir(p, 0755) != 0 && errno != EEXIST) fail_msg("mkdir %s: %s", p, strerror(errno));
}

static void put(const char *rel, const char *text) {
  char p[PATH_MAX];
  snprintf(p, sizeof(p), "%s/%s", root, rel);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void link_(const char *target, const char *rel) {
  char p[PATH_MAX];
  snprintf(p, sizeof(p), "%s/%s", root, rel);
  if (symlink(target, p) != 0) fail_msg("symlink %s: %s", p, strerror(errno));
}

/* A PCI function at devices/<path>, numa_node written unless numa < -1. */
static void pci_dev(const char *path, int numa) {
  char rel[PATH_MAX], v[16];
  snprintf(rel, sizeof(rel), "devices/%s", path);
  mkdirs(rel);
  if (numa >= -1) {
    snprintf(v, sizeof(v), "%d\n", numa);
    snprintf(rel, sizeof(rel), "devices/%s/numa_node", path);
    put(rel, v);
  }
}

static const char *last(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* As the kernel lays them out: bus/pci/devices/<id> -> ../../../devices/<path>. */
static void gpu(const char *path, int numa) {
  char rel[PATH_MAX], tgt[PATH_MAX];
  pci_dev(path, numa);
  mkdirs("bus/pci/devices");
  snprintf(rel, sizeof(rel), "bus/pci/devices/%s", last(path));
  snprintf(tgt, sizeof(tgt), "../../../devices/%s", path);
  link_(tgt, rel);
}

/* class/net/<if> -> ../../devices/<path>/net/<if>, whose device -> ../../../<id>. */
static void nic(const char *path, const char *name, int numa) {
  char rel[PATH_MAX], tgt[PATH_MAX];
  pci_dev(path, numa);
  snprintf(rel, sizeof(rel), "devices/%s/net/%s", path, name);
  mkdirs(rel);
  snprintf(rel, sizeof(rel), "devices/%s/net/%s/device", path, name);
  snprintf(tgt, sizeof(tgt), "../../../%s", last(path));
  link_(tgt, rel);
  mkdirs("class/net");
  snprintf(rel, sizeof(rel), "class/net/%s", name);
  snprintf(tgt, sizeof(tgt), "../../devices/%s/net/%s", path, name);
  link_(tgt, rel);
}

static int setup_root(void **state) {
  (void)state;
  snprintf(root, sizeof(root), "/tmp/tpx-topo-XXXXXX");
  assert_non_null(mkdtemp(root));
  return 0;
}

static int teardown_root(void **state) {
  (void)state;
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
  assert_int_equal(system(cmd), 0);
  return 0;
}

static const char *A3_GPUS[8] = {"0000:04:00.0", "0000:05:00.0", "0000:0a:00.0", "0000:0b:00.0",
                                 "0000:84:00.0", "0000:85:00.0", "0000:8a:00.0", "0000:8b:00.0"};
static const char *A3_NICS[4] = {"eth1", "eth2", "eth3", "eth4"};

/* Host bridge, root port, switch upstream port, one downstream port per device. */
static void a3_switch(const char *hb, const char *rp, const char *up, const char *down, int bus0, int numa,
                      const char *nicname) {
  char p[PATH_MAX];
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof(p), "%s/%s/%s/%s%d.0/0000:%02x:00.0", hb, rp, up, down, i, bus0 + i);
    if (i < 2) gpu(p, numa);
    else nic(p, nicname, numa);
  }
}

static void build_a3(void) {
  a3_switch("pci0000:00", "0000:00:01.0", "0000:02:00.0", "0000:03:0", 0x04, 0, "eth1");
  a3_switch("pci0000:00", "0000:00:03.0", "0000:08:00.0", "0000:09:0", 0x0a, 0, "eth2");
  a3_switch("pci0000:80", "0000:80:01.0", "0000:82:00.0", "0000:83:0", 0x84, 1, "eth3");
  a3_switch("pci0000:80", "0000:80:03.0", "0000:88:00.0", "0000:89:0", 0x8a, 1, "eth4");
  mkdirs("devices/system/node/node0");
  mkdirs("devices/system/node/node1");
}

static tpx_topo_t *detect(const char *const *nics, int nnics, const char *const *gpus, int ngpus,
                          const char *map) {
  tpx_topo_params_t p;
  tpx_topo_params_init(&p);
  p.sysfs_root = root;
  p.nics = nics;
  p.nnics = nnics;
  p.gpu_bus_ids = gpus;
  p.ngpus = ngpus;
  p.map = map;
  tpx_topo_t *t = NULL;
  int rc = tpx_topo_detect(&p, &t);
  if (rc) fail_msg("tpx_topo_detect: %s", tpx_last_error());
  return t;
}

/* GPU g's NICs as "eth1,eth2". */
static const char *nics_of(const tpx_topo_t *t, int g) {
  static char buf[256];
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < t->gpus[g].nnics; i++)
    len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? "," : "", t->nics[t->gpus[g].nics[i]].name);
  return buf;
}

static void assert_error_mentions(const char *what) {
  if (strstr(tpx_last_error(), what) == NULL) fail_msg("last error '%s' lacks '%s'", tpx_last_error(), what);
}

/* ---- A3-high ---------------------------------------------------------------------------- */

static void test_a3_high(void **state) {
  (void)state;
  build_a3();
  tpx_topo_t *t = detect(A3_NICS, 4, A3_GPUS, 8, "");
  assert_int_equal(t->ngpus, 8);
  assert_int_equal(t->nnics, 4);
  static const char *want[8] = {"eth1", "eth1", "eth2", "eth2", "eth3", "eth3", "eth4", "eth4"};
  static const char *nic_bus[4] = {"0000:06:00.0", "0000:0c:00.0", "0000:86:00.0", "0000:8c:00.0"};
  for (int i = 0; i < 4; i++) {
    assert_string_equal(t->nics[i].bus_id, nic_bus[i]);
    assert_int_equal(t->nics[i].numa, i < 2 ? 0 : 1);
  }
  for (int g = 0; g < 8; g++) {
    const tpx_topo_gpu_t *x = &t->gpus[g];
    assert_string_equal(x->bus_id, A3_GPUS[g]);
    assert_int_equal(x->numa, g < 4 ? 0 : 1);
    assert_int_equal(x->why, TPX_TOPO_PCI);
    assert_int_equal(x->depth, 4); /* devices, host bridge, root port, switch upstream port */
    assert_string_equal(nics_of(t, g), want[g]);
  }
  assert_string_equal(t->gpus[0].via, "0000:02:00.0");
  assert_string_equal(t->gpus[7].via, "0000:88:00.0");
  assert_string_equal(t->gpus[0].pci_path,
                      "/devices/pci0000:00/0000:00:01.0/0000:02:00.0/0000:03:00.0/0000:04:00.0");
  tpx_topo_free(t);

  /* CUDA's 8-digit domain is the same device. */
  const char *cuda_ids[1] = {"00000000:8A:00.0"};
  t = detect(A3_NICS, 4, cuda_ids, 1, "");
  assert_string_equal(t->gpus[0].bus_id, "0000:8a:00.0");
  assert_string_equal(nics_of(t, 0), "eth4");
  tpx_topo_free(t);
}

/* Only some NICs are the transport's: the next nearest ones, evenly. */
static void test_a3_subsets(void **state) {
  (void)state;
  build_a3();
  const char *odd[2] = {"eth1", "eth3"};
  tpx_topo_t *t = detect(odd, 2, A3_GPUS, 8, "");
  assert_string_equal(nics_of(t, 2), "eth1"); /* same host bridge */
  assert_int_equal(t->gpus[2].why, TPX_TOPO_HOST);
  assert_string_equal(t->gpus[2].via, "pci0000:00");
  assert_string_equal(nics_of(t, 6), "eth3");
  tpx_topo_free(t);

  const char *far[2] = {"eth3", "eth4"};
  t = detect(far, 2, A3_GPUS, 8, "");
  assert_string_equal(nics_of(t, 0), "eth3,eth4"); /* both across the socket: both */
  assert_int_equal(t->gpus[0].why, TPX_TOPO_ANY);
  assert_int_equal(t->nics[t->gpus[0].nics[0]].numa, 1);
  tpx_topo_free(t);

  /* Interfaces with no PCI device (veth, lo) are never "near". */
  const char *mixed[3] = {"veth0", "eth2", "lo"};
  t = detect(mixed, 3, A3_GPUS, 8, "");
  assert_string_equal(nics_of(t, 0), "eth2");
  assert_string_equal(t->nics[0].pci_path, "");
  assert_int_equal(t->nics[0].numa, -1);
  tpx_topo_free(t);
}

static void test_a3_map(void **state) {
  (void)state;
  build_a3();
  tpx_topo_t *t = detect(A3_NICS, 4, A3_GPUS, 8, "0-3:eth1,eth2;4-7:eth3,eth4");
  for (int g = 0; g < 8; g++) {
    assert_int_equal(t->gpus[g].why, TPX_TOPO_MAP);
    assert_string_equal(nics_of(t, g), g < 4 ? "eth1,eth2" : "eth3,eth4");
  }
  tpx_topo_free(t);
  /* The map covers some GPUs; the rest are detected. */
  t = detect(A3_NICS, 4, A3_GPUS, 8, "6:eth1");
  assert_string_equal(nics_of(t, 6), "eth1");
  assert_int_equal(t->gpus[7].why, TPX_TOPO_PCI);
  tpx_topo_free(t);
  /* No GPU known at all (no CUDA): the map's GPUs still count. */
  t = detect(A3_NICS, 4, NULL, 0, "1,3:eth2");
  assert_int_equal(t->ngpus, 4);
  assert_int_equal(t->gpus[0].why, TPX_TOPO_NONE);
  assert_string_equal(nics_of(t, 3), "eth2");
  tpx_topo_free(t);

  tpx_topo_params_t p;
  tpx_topo_params_init(&p);
  p.sysfs_root = root;
  p.nics = A3_NICS;
  p.nnics = 4;
  p.gpu_bus_ids = A3_GPUS;
  p.ngpus = 8;
  p.map = "0-3:eth1,eth9";
  t = (tpx_topo_t *)0x1;
  assert_int_equal(tpx_topo_detect(&p, &t), TPX_EINVAL);
  assert_null(t);
  assert_error_mentions("'eth9'");
  p.map = "0-3:eth1;4-x:eth3";
  assert_int_equal(tpx_topo_detect(&p, &t), TPX_EINVAL);
  assert_error_mentions("'4-x'");
}

/* ---- no NUMA information; one NIC ---------------------------------------------------------- */

/* A flat VM: each device behind its own host bridge, numa_node -1 or absent. */
static void test_no_numa(void **state) {
  (void)state;
  gpu("pci0000:00/0000:00:04.0", -1);
  gpu("pci0000:01/0000:01:05.0", -2);
  nic("pci0000:02/0000:02:06.0", "eth1", -1);
  nic("pci0000:03/0000:03:07.0", "eth2", -2);
  const char *gpus[2] = {"0000:00:04.0", "0000:01:05.0"};
  const char *nics[2] = {"eth1", "eth2"};
  tpx_topo_t *t = detect(nics, 2, gpus, 2, "");
  for (int g = 0; g < 2; g++) {
    assert_int_equal(t->gpus[g].numa, -1);
    assert_int_equal(t->gpus[g].why, TPX_TOPO_ANY);
    assert_string_equal(nics_of(t, g), "eth1,eth2"); /* equally near: spread over both */
  }
  assert_int_equal(t->nics[0].numa, -1);
  assert_int_equal(t->nics[1].numa, -1);
  tpx_topo_free(t);
  /* A GPU the tree does not know, and a malformed id: unknown, not an error. */
  const char *odd[2] = {"0000:99:00.0", "zz"};
  t = detect(nics, 2, odd, 2, "");
  assert_int_equal(t->gpus[0].why, TPX_TOPO_NONE);
  assert_int_equal(t->gpus[0].nnics, 0);
  assert_string_equal(t->gpus[1].bus_id, "");
  tpx_topo_free(t);
}

static void test_single_nic(void **state) {
  (void)state;
  gpu("pci0000:00/0000:00:01.0/0000:04:00.0", 0);
  gpu("pci0000:80/0000:80:01.0/0000:84:00.0", 1);
  nic("pci0000:00/0000:00:02.0/0000:06:00.0", "eth0", 0);
  const char *gpus[2] = {"0000:04:00.0", "0000:84:00.0"};
  const char *nics[1] = {"eth0"};
  tpx_topo_t *t = detect(nics, 1, gpus, 2, "");
  assert_string_equal(nics_of(t, 0), "eth0");
  assert_int_equal(t->gpus[0].why, TPX_TOPO_HOST);
  assert_string_equal(nics_of(t, 1), "eth0"); /* the only one, on the other node */
  assert_int_equal(t->gpus[1].why, TPX_TOPO_ANY);
  assert_int_equal(t->gpus[1].numa, 1);
  assert_int_equal(t->nics[0].numa, 0);
  tpx_topo_free(t);
  /* A missing sysfs root is no error either: nothing is known. */
  size_t n = strlen(root);
  strcat(root, "/nonexistent");
  t = detect(nics, 1, gpus, 2, "");
  assert_int_equal(t->gpus[0].why, TPX_TOPO_NONE);
  tpx_topo_free(t);
  root[n] = '\0';
}

/* ---- TPX_GPU_NIC_MAP ------------------------------------------------------------------------ */

static void bad_map(const char *s, const char *mention) {
  tpx_gpumap_t m;
  assert_int_equal(tpx__gpumap_parse(s, &m), TPX_EINVAL);
  assert_int_equal(m.n, 0);
  assert_error_mentions("TPX_GPU_NIC_MAP");
  assert_error_mentions(mention);
}

static void test_map_parse(void **state) {
  (void)state;
  tpx_gpumap_t m;
  assert_int_equal(tpx__gpumap_parse("0-3:eth1,eth2;4-7:eth3,eth4", &m), 0);
  assert_int_equal(m.n, 2);
  assert_int_equal(m.e[0].gpus, 0x0f);
  assert_int_equal(m.e[1].gpus, 0xf0);
  assert_int_equal(m.e[1].nnics, 2);
  assert_string_equal(m.e[1].nics[1], "eth4");
  assert_ptr_equal(tpx__gpumap_find(&m, 5), &m.e[1]);
  assert_null(tpx__gpumap_find(&m, 8));
  assert_null(tpx__gpumap_find(&m, -1));
  assert_int_equal(tpx__gpumap_parse(" 0 - 1 , 5 : eth1 , ,eth2 ; ;63:ib0;", &m), 0);
  assert_int_equal(m.n, 2);
  assert_int_equal(m.e[0].gpus, 0x23);
  assert_int_equal(m.e[0].nnics, 2);
  assert_int_equal(m.e[1].gpus, 1ull << 63);
  assert_int_equal(tpx__gpumap_parse("", &m), 0);
  assert_int_equal(m.n, 0);
  assert_int_equal(tpx__gpumap_parse(NULL, &m), 0);
  assert_int_equal(tpx__gpumap_parse(" ; ", &m), 0);

  bad_map("0-3eth1", "'0-3eth1' has no ':'");
  bad_map("0-3:eth1;4-x:eth3", "'4-x' in '4-x:eth3'");
  bad_map("3-0:eth1", "'3-0' in '3-0:eth1' runs backwards");
  bad_map("0-3:eth1;2:eth2", "GPU 2 appears twice (again in '2:eth2')");
  bad_map("0:", "'0:' names no interface");
  bad_map("0: , ", "names no interface");
  bad_map(":eth1", "':eth1' names no GPU");
  bad_map("64:eth1", "'64'");
  bad_map("-1:eth1", "'-1'");
  bad_map("0:averyveryverylongname", "'averyveryverylongname' in '0:averyveryverylongname' is longer");
  bad_map("0:a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "more than 16 interfaces");
  bad_map("0:a;1:a;2:a;3:a;4:a;5:a;6:a;7:a;8:a;9:a;10:a;11:a;12:a;13:a;14:a;15:a;16:a", "more than 16 entries");
}

/* The environment goes through the same parser; a bad value is named and ignored. */
static void test_map_and_abi_env(void **state) {
  (void)state;
  tpx_config_t c;
  setenv("TPX_GPU_NIC_MAP", "0-3:eth1,eth2;4-7:eth3,eth4", 1);
  setenv("TPX_NET_ABI", "7", 1);
  assert_int_equal(tpx_config_from_env(&c), 0);
  assert_string_equal(c.gpu_nic_map, "0-3:eth1,eth2;4-7:eth3,eth4");
  assert_int_equal(c.net_abi, 7);
  setenv("TPX_GPU_NIC_MAP", "0-3:eth1;4-x:eth3", 1);
  assert_int_equal(tpx_config_from_env(&c), TPX_EINVAL);
  assert_string_equal(c.gpu_nic_map, "");
  assert_error_mentions("'4-x'");
  unsetenv("TPX_GPU_NIC_MAP");
  static const char *bad_abi[] = {"6", "13", "0", "v7"};
  for (int i = 0; i < 4; i++) {
    setenv("TPX_NET_ABI", bad_abi[i], 1);
    assert_int_equal(tpx_config_from_env(&c), TPX_EINVAL);
    assert_int_equal(c.net_abi, 0);
  }
  setenv("TPX_NET_ABI", "12", 1);
  assert_int_equal(tpx_config_from_env(&c), 0);
  assert_int_equal(c.net_abi, 12);
  unsetenv("TPX_NET_ABI");
}

/* ---- NUMA helpers ---------------------------------------------------------------------------- */

static void test_cpulist(void **state) {
  (void)state;
  unsigned char cpus[64];
  assert_int_equal(tpx__numa_parse_cpulist("0-3,8-11\n", cpus, 64), 8);
  assert_true(cpus[3] && cpus[8] && !cpus[4]);
  assert_int_equal(tpx__numa_parse_cpulist("5", cpus, 64), 1);
  assert_int_equal(tpx__numa_parse_cpulist("60-70", cpus, 64), 4); /* beyond the set: dropped */
  assert_int_equal(tpx__numa_parse_cpulist("\n", cpus, 64), 0);
  assert_int_equal(tpx__numa_parse_cpulist("a", cpus, 64), TPX_EINVAL);
  assert_int_equal(tpx__numa_parse_cpulist("3-1", cpus, 64), TPX_EINVAL);
  assert_int_equal(tpx__numa_parse_cpulist("1,,2", cpus, 64), TPX_EINVAL);
}

struct bind_arg {
  int node, rc, ncpu, cpu;
};

static void *bind_main(void *arg) {
  struct bind_arg *b = arg;
  b->rc = tpx__numa_bind_thread(root, b->node);
  cpu_set_t s;
  if (sched_getaffinity(0, sizeof(s), &s) == 0) b->ncpu = CPU_COUNT(&s);
  return NULL;
}

/* A thread pinned to a fake node holding exactly one CPU this process may use;
 * unknown nodes leave the thread as it was. (In a thread: the test keeps its CPUs.) */
static void test_bind_thread(void **state) {
  (void)state;
  cpu_set_t s;
  assert_int_equal(sched_getaffinity(0, sizeof(s), &s), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &s)) cpu++;
  char text[32];
  snprintf(text, sizeof(text), "%d\n", cpu);
  mkdirs("devices/system/node/node0");
  put("devices/system/node/node0/cpulist", text);
  for (int node = -1; node <= 1; node++) {
    struct bind_arg b = {.node = node};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bind_main, &b), 0);
    pthread_join(th, NULL);
    if (node == 0) {
      assert_int_equal(b.rc, 0);
      assert_int_equal(b.ncpu, 1);
    } else {
      assert_true(b.rc < 0);
      assert_int_equal(b.ncpu, CPU_COUNT(&s));
    }
  }
  /* Preferring a node and restoring: the calling thread's policy comes back. */
  tpx_numa_pref_t pref;
  tpx__numa_prefer_enter(-1, &pref);
  assert_int_equal(pref.active, 0);
  tpx__numa_prefer_enter(0, &pref); /* node 0 exists everywhere; the kernel may still refuse (seccomp) */
  void *p = malloc(1 << 20);
  assert_non_null(p);
  memset(p, 1, 1 << 20);
  free(p);
  tpx__numa_prefer_leave(&pref);
  assert_int_equal(pref.active, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_a3_high, setup_root, teardown_root),
      cmocka_unit_test_setup_teardown(test_a3_subsets, setup_root, teardown_root),
      cmocka_unit_test_setup_teardown(test_a3_map, setup_root, teardown_root),
      cmocka_unit_test_setup_teardown(test_no_numa, setup_root, teardown_root),
      cmocka_unit_test_setup_teardown(test_single_nic, setup_root, teardown_root),
      cmocka_unit_test(test_map_parse),
      cmocka_unit_test(test_map_and_abi_env),
      cmocka_unit_test(test_cpulist),
      cmocka_unit_test_setup_teardown(test_bind_thread, setup_root, teardown_root),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
