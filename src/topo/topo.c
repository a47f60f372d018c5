/* GPU-NIC topology from sysfs (include/tpx/topo.h, docs/TOPOLOGY.md). */
#define _GNU_SOURCE /* strchrnul */
#include "topo/topo.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/gpumap.h"
#include "common/log.h"
#include "cuda/gpu.h"
#include "tpx/config.h"

void tpx_topo_params_init(tpx_topo_params_t *p) { memset(p, 0, sizeof(*p)); }

const char *tpx_topo_why_str(int why) {
  static const char *names[] = {"none", "map", "pci", "host-bridge", "numa", "any"};
  return why >= 0 && why <= TPX_TOPO_ANY ? names[why] : "?";
}

int tpx__topo_bus_id_norm(const char *in, char *out, size_t cap) {
  unsigned dom, bus, dev, fn;
  char tail;
  if (in == NULL || sscanf(in, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4 || dom > 0xffff ||
      bus > 0xff || dev > 0x1f || fn > 7)
    return tpx_err_quiet(TPX_EINVAL, "'%s' is not a PCI bus id (domain:bus:device.function)", in ? in : "");
  snprintf(out, cap, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
  return 0;
}

/* realpath(root + rel) below realpath(root), as "/devices/..."; "" when absent. */
static void sys_path(const char *root, const char *rel, char *out, size_t cap) {
  char rroot[PATH_MAX], full[PATH_MAX + 64], res[PATH_MAX];
  out[0] = '\0';
  if (realpath(root, rroot) == NULL) return;
  snprintf(full, sizeof(full), "%s/%s", rroot, rel);
  if (realpath(full, res) == NULL) return;
  size_t n = strlen(rroot);
  if (strcmp(rroot, "/") == 0) n = 0;
  if (strncmp(res, rroot, n) != 0 || res[n] != '/') return; /* a link out of the tree: unknown */
  snprintf(out, cap, "%s", res + n);
}

/* <root><path>/numa_node, TPX_NUMA_UNKNOWN when absent or unknown. */
static int read_numa(const char *root, const char *path) {
  if (path[0] == '\0') return TPX_NUMA_UNKNOWN;
  char f[PATH_MAX];
  snprintf(f, sizeof(f), "%s%s/numa_node", root, path);
  FILE *fp = fopen(f, "r");
  if (!fp) return TPX_NUMA_UNKNOWN;
  int v = TPX_NUMA_UNKNOWN;
  if (fscanf(fp, "%d", &v) != 1 || v < 0) v = TPX_NUMA_UNKNOWN;
  fclose(fp);
  return v;
}

static int add_nic(const char *root, const char *name, tpx_topo_t *t) {
  if (t->nnics >= TPX_TOPO_MAX_NICS)
    return tpx_err_quiet(TPX_EINVAL, "topology: more than %d interfaces", TPX_TOPO_MAX_NICS);
  tpx_topo_nic_t *n = &t->nics[t->nnics++];
  n->numa = -1;
  if (name == NULL || name[0] == '\0' || strlen(name) >= TPX_TOPO_NAME_MAX || strchr(name, '/') || name[0] == '.')
    return 0; /* a device no interface can be (a plugin's own name): nothing known about it */
  snprintf(n->name, sizeof(n->name), "%s", name);
  char rel[PATH_MAX];
  snprintf(rel, sizeof(rel), "class/net/%s/device", name);
  sys_path(root, rel, n->pci_path, sizeof(n->pci_path));
  const char *last = strrchr(n->pci_path, '/');
  if (last && tpx__topo_bus_id_norm(last + 1, n->bus_id, sizeof(n->bus_id)) != 0) n->bus_id[0] = '\0';
  n->numa = read_numa(root, n->pci_path);
  return 0;
}

static void add_gpu(const char *root, int idx, const char *bus_id, tpx_topo_t *t) {
  tpx_topo_gpu_t *g = &t->gpus[idx];
  g->index = idx;
  g->numa = -1;
  if (bus_id == NULL || bus_id[0] == '\0' || tpx__topo_bus_id_norm(bus_id, g->bus_id, sizeof(g->bus_id)) != 0)
    return;
  char rel[PATH_MAX];
  snprintf(rel, sizeof(rel), "bus/pci/devices/%s", g->bus_id);
  sys_path(root, rel, g->pci_path, sizeof(g->pci_path));
  g->numa = read_numa(root, g->pci_path);
}

/* Leading path components a and b share; *via gets the last shared one. */
static int common_depth(const char *a, const char *b, char *via, size_t cap) {
  int depth = 0;
  via[0] = '\0';
  while (*a == '/' && *b == '/') {
    const char *ea = strchrnul(a + 1, '/'), *eb = strchrnul(b + 1, '/');
    if (ea - a != eb - b || memcmp(a, b, (size_t)(ea - a)) != 0) break;
    depth++;
    snprintf(via, cap, "%.*s", (int)(ea - a - 1), a + 1);
    a = ea, b = eb;
  }
  return depth;
}

/* The nearest NICs by PCI path, then NUMA node (topo.h). */
static void choose_near(tpx_topo_t *t, tpx_topo_gpu_t *g) {
  int best = -1, score[TPX_TOPO_MAX_NICS];
  char via[TPX_TOPO_MAX_NICS][TPX_TOPO_NAME_MAX];
  int depth[TPX_TOPO_MAX_NICS];
  if (g->pci_path[0] == '\0') return;
  for (int i = 0; i < t->nnics; i++) {
    const tpx_topo_nic_t *n = &t->nics[i];
    score[i] = -1;
    if (n->pci_path[0] == '\0') continue; /* not a PCI device (veth, lo): never "near" */
    depth[i] = common_depth(g->pci_path, n->pci_path, via[i], sizeof(via[i]));
    int same_numa = g->numa >= 0 && g->numa == n->numa;
    score[i] = depth[i] * 2 + same_numa;
    if (score[i] > best) best = score[i];
  }
  if (best < 0) return;
  for (int i = 0; i < t->nnics; i++) {
    if (score[i] != best) continue;
    if (g->nnics == 0) {
      g->depth = depth[i];
      snprintf(g->via, sizeof(g->via), "%s", via[i]);
    } else if (strcmp(g->via, via[i]) != 0) {
      g->via[0] = '\0'; /* equally deep below different bridges */
    }
    g->nics[g->nnics++] = i;
  }
  /* "/devices/pci0000:00/0000:00:01.0/...": 2 = the host bridge, deeper = a PCI bridge. */
  if (g->depth >= 3) g->why = TPX_TOPO_PCI;
  else if (g->depth == 2) g->why = TPX_TOPO_HOST;
  else g->why = best & 1 ? TPX_TOPO_NUMA : TPX_TOPO_ANY;
}

static int apply_map(tpx_topo_t *t, tpx_topo_gpu_t *g, const tpx_gpumap_entry_t *e) {
  for (int k = 0; k < e->nnics; k++) {
    int i = 0;
    while (i < t->nnics && strcmp(t->nics[i].name, e->nics[k]) != 0)
      i++;
    if (i == t->nnics) {
      char have[160] = "";
      size_t len = 0;
      for (int j = 0; j < t->nnics && len + TPX_TOPO_NAME_MAX + 2 < sizeof(have); j++)
        len += (size_t)snprintf(have + len, sizeof(have) - len, "%s%s", j ? ", " : "", t->nics[j].name);
      return tpx_err_quiet(TPX_EINVAL, "TPX_GPU_NIC_MAP: GPU %d's interface '%s' is not one of the transport's (%s)",
                           g->index, e->nics[k], len ? have : "none");
    }
    int dup = 0;
    for (int j = 0; j < g->nnics; j++)
      dup |= g->nics[j] == i;
    if (!dup) g->nics[g->nnics++] = i;
  }
  g->why = TPX_TOPO_MAP;
  return 0;
}

/* GPU bus ids from the caller, else the CUDA driver (none without CUDA). */
static int gpu_list(const tpx_topo_params_t *p, char ids[][TPX_TOPO_NAME_MAX], int *n) {
  *n = 0;
  if (p->gpu_bus_ids) {
    if (p->ngpus < 0 || p->ngpus > TPX_TOPO_MAX_GPUS)
      return tpx_err_quiet(TPX_EINVAL, "topology: %d GPUs (at most %d)", p->ngpus, TPX_TOPO_MAX_GPUS);
    for (int i = 0; i < p->ngpus; i++)
      if (!p->gpu_bus_ids[i] || tpx__topo_bus_id_norm(p->gpu_bus_ids[i], ids[i], TPX_TOPO_NAME_MAX) != 0)
        ids[i][0] = '\0'; /* unknown (a malformed id is not a fact either) */
    *n = p->ngpus;
    return 0;
  }
  int cnt = 0;
  if (tpx__gpu_device_count(&cnt) != 0 || cnt <= 0) return 0; /* no CUDA, no GPU: unknown, not an error */
  if (cnt > TPX_TOPO_MAX_GPUS) cnt = TPX_TOPO_MAX_GPUS;
  char buf[64];
  for (int i = 0; i < cnt; i++)
    if (tpx__gpu_pci_bus_id(i, buf, sizeof(buf)) != 0 || tpx__topo_bus_id_norm(buf, ids[i], TPX_TOPO_NAME_MAX) != 0)
      ids[i][0] = '\0';
  *n = cnt;
  return 0;
}

static int detect(const tpx_topo_params_t *p, tpx_topo_t *t) {
  const char *root = p->sysfs_root ? p->sysfs_root : "/sys";
  const char *mapstr = p->map ? p->map : tpx_config_global()->gpu_nic_map;
  tpx_gpumap_t *map = malloc(sizeof(*map));
  char(*ids)[TPX_TOPO_NAME_MAX] = malloc(sizeof(char[TPX_TOPO_MAX_GPUS][TPX_TOPO_NAME_MAX]));
  int rc = map && ids ? 0 : tpx_err_quiet(TPX_ENOMEM, "topology: out of memory");
  int ngpu = 0;
  if (rc == 0) rc = tpx__gpumap_parse(mapstr, map);
  for (int i = 0; rc == 0 && i < p->nnics; i++)
    rc = add_nic(root, p->nics[i], t);
  if (rc == 0) rc = gpu_list(p, ids, &ngpu);
  if (rc == 0) {
    for (int i = 0; i < map->n; i++) /* GPUs the map lists count even when nothing else knows them */
      while (ngpu < TPX_TOPO_MAX_GPUS && (map->e[i].gpus >> ngpu) != 0)
        ids[ngpu++][0] = '\0';
    t->ngpus = ngpu;
  }
  for (int i = 0; rc == 0 && i < ngpu; i++) {
    add_gpu(root, i, ids[i], t);
    const tpx_gpumap_entry_t *e = tpx__gpumap_find(map, i);
    if (e) rc = apply_map(t, &t->gpus[i], e);
    else choose_near(t, &t->gpus[i]);
  }
  free(map);
  free(ids);
  return rc;
}

int tpx__topo_detect(const tpx_topo_params_t *p, tpx_topo_t **out) {
  if (!p || !out || (p->nnics > 0 && !p->nics) || p->nnics < 0)
    return tpx_err_quiet(TPX_EINVAL, "tpx_topo_detect: bad arguments");
  *out = NULL;
  tpx_topo_t *t = calloc(1, sizeof(*t));
  if (!t) return tpx_err_quiet(TPX_ENOMEM, "topology: out of memory");
  int rc = detect(p, t);
  if (rc) {
    free(t);
    return rc;
  }
  *out = t;
  return 0;
}

int tpx_topo_detect(const tpx_topo_params_t *p, tpx_topo_t **out) {
  int rc = tpx__topo_detect(p, out);
  return rc; /* recorded quietly: the caller decides */
}

void tpx_topo_free(tpx_topo_t *t) { free(t); }
