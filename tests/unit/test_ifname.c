/* The NCCL_SOCKET_IFNAME matcher (common/ifname.h): a table built from NCCL's
 * documented examples (eth, =eth0, =eth0,eth1, ^docker, ^=docker0) plus the
 * edges (blanks, empty and one-character values, ":port" suffixes, empty
 * lists, malformed lists), then the automatic choice's tiers and fallbacks. */
#include <stdio.h>
#include <string.h>

#include "common/ifname.h"
#include "common/util.h"
#include "testutil.h"
#include "tpx/error.h"

struct match_case {
  const char *spec;
  const char *name;
  int want; /* tpx__ifname_match */
};

static const struct match_case cases[] = {
    /* "eth": every interface starting with eth. */
    {"eth", "eth0", 1},
    {"eth", "eth1", 1},
    {"eth", "eth12", 1},
    {"eth", "ens5", 0},
    {"eth", "et", 0},
    {"eth", "lo", 0},
    {"eth,ib", "ib0", 1},
    {"eth,ib", "docker0", 0},
    /* "=eth0": only eth0. */
    {"=eth0", "eth0", 1},
    {"=eth0", "eth01", 0},
    {"=eth0", "eth1", 0},
    {"=eth0", "eth", 0},
    /* "=eth0,eth1": only those two. */
    {"=eth0,eth1", "eth0", 1},
    {"=eth0,eth1", "eth1", 1},
    {"=eth0,eth1", "eth2", 0},
    {"=eth0,eth1", "eth10", 0},
    /* "^docker": anything not starting with docker. */
    {"^docker", "docker0", 0},
    {"^docker", "docker_gwbridge", 0},
    {"^docker", "eth0", 1},
    {"^docker", "lo", 1},
    {"^docker,lo", "lo", 0},
    {"^docker,lo", "lo2", 0},
    {"^docker,lo", "eth0", 1},
    /* "^=docker0": anything but docker0 exactly. */
    {"^=docker0", "docker0", 0},
    {"^=docker0", "docker1", 1},
    {"^=docker0", "docker01", 1},
    {"^=docker0", "eth0", 1},
    /* '=' then '^' is not an exclusion: "^eth0" is a name. */
    {"=^eth0", "eth0", 0},
    /* Blanks around the value and around each name are trimmed. */
    {" eth0 , ib0 ", "eth0", 1},
    {" eth0 , ib0 ", "eth01", 1},
    {" eth0 , ib0 ", "ib0", 1},
    {" eth0 , ib0 ", "ib", 0},
    {" =eth0 ", "eth0", 1},
    {" =eth0 ", "eth01", 0},
    {"^ docker , lo ", "docker0", 0},
    {"^ docker , lo ", "lo", 0},
    {"^ docker , lo ", "eth0", 1},
    {"\teth1\n", "eth1", 1},
    /* Empty items are skipped; NCCL's ":port" suffix is dropped. */
    {",,eth0,,", "eth0", 1},
    {",,eth0,,", "ens0", 0},
    {"=eth0:1", "eth0", 1},
    {"eth0:1,ib:2", "ib0", 1},
    /* Unset, empty or one character (NCCL ignores those): the automatic
     * choice, whose first tiers are ib* and anything but docker, lo, virbr. */
    {NULL, "eth0", 1},
    {NULL, "ib0", 1},
    {NULL, "docker0", 0},
    {NULL, "lo", 0},
    {NULL, "virbr0", 0},
    {"", "eth0", 1},
    {"", "lo", 0},
    {"   ", "eth0", 1},
    {"^", "eth0", 1},
    {"^", "lo", 0},
    {"=", "eth0", 1},
    {"e", "eth0", 1},
    {"e", "lo", 0},
    /* Lists without names: include nothing, exclude nothing. */
    {",,", "eth0", 0},
    {"=,", "eth0", 0},
    {"^,", "lo", 1},
    {"^=", "lo", 1},
    {"^=", "docker0", 1},
};

static void test_match_table(void **state) {
  (void)state;
  int bad = 0;
  for (size_t i = 0; i < TPX_ARRAY_LEN(cases); i++) {
    const struct match_case *c = &cases[i];
    int got = tpx__ifname_match(c->spec, c->name);
    if (got != c->want) {
      fprintf(stderr, "tpx__ifname_match(%s%s%s, \"%s\") = %d, want %d\n", c->spec ? "\"" : "",
              c->spec ? c->spec : "NULL", c->spec ? "\"" : "", c->name, got, c->want);
      bad++;
    }
  }
  assert_int_equal(bad, 0);
}

static void test_parse(void **state) {
  (void)state;
  tpx_ifname_spec_t s;
  assert_int_equal(tpx__ifname_parse(" ^=eth0 , eth1:3 ,, ", &s), 0);
  assert_false(s.automatic);
  assert_true(s.exclude);
  assert_true(s.exact);
  assert_int_equal(s.n, 2);
  assert_string_equal(s.names[0], "eth0");
  assert_string_equal(s.names[1], "eth1");
  assert_int_equal(tpx__ifname_parse(NULL, &s), 0);
  assert_true(s.automatic);
  assert_int_equal(s.n, 0);
  assert_int_equal(tpx__ifname_parse(" x ", &s), 0);
  assert_true(s.automatic);

  /* A name no interface could have (16 characters or more), too many names:
   * an error, not a list that silently matches nothing. */
  assert_int_equal(tpx__ifname_parse("abcdefghijklmnop", &s), TPX_EINVAL);
  assert_int_equal(tpx__ifname_parse("=eth0,abcdefghijklmnopq", &s), TPX_EINVAL);
  assert_int_equal(tpx__ifname_parse("abcdefghijklmno", &s), 0); /* 15: fits */
  char many[200] = "";
  for (int i = 0; i < TPX_IFNAME_MAX_ITEMS + 1; i++)
    strcat(many, "e,");
  assert_int_equal(tpx__ifname_parse(many, &s), TPX_EINVAL);
  assert_int_equal(tpx__ifname_match(many, "eth0"), TPX_EINVAL);
  many[2 * TPX_IFNAME_MAX_ITEMS] = '\0';
  assert_int_equal(tpx__ifname_parse(many, &s), 0);
  assert_int_equal(s.n, TPX_IFNAME_MAX_ITEMS);
}

static void test_tier(void **state) {
  (void)state;
  tpx_ifname_spec_t s;
  assert_int_equal(tpx__ifname_parse("", &s), 0);
  assert_int_equal(tpx__ifname_tier(&s, "ib0"), TPX_IFNAME_TIER_IB);
  assert_int_equal(tpx__ifname_tier(&s, "eth0"), TPX_IFNAME_TIER_OTHER);
  assert_int_equal(tpx__ifname_tier(&s, "ens5"), TPX_IFNAME_TIER_OTHER);
  assert_int_equal(tpx__ifname_tier(&s, "docker0"), TPX_IFNAME_TIER_DOCKER);
  assert_int_equal(tpx__ifname_tier(&s, "lo"), TPX_IFNAME_TIER_LO);
  assert_int_equal(tpx__ifname_tier(&s, "virbr0"), TPX_IFNAME_TIER_VIRBR);
  assert_int_equal(tpx__ifname_parse("^eth", &s), 0);
  assert_int_equal(tpx__ifname_tier(&s, "lo"), 0); /* an explicit list: one tier */
  assert_int_equal(tpx__ifname_tier(&s, "eth0"), -1);
}

/* The automatic choice uses the best tier present, as NCCL's
 * ncclFindInterfaces: ib*, else ordinary, else docker*, else lo*, else virbr*. */
static void test_select(void **state) {
  (void)state;
  unsigned char sel[8];
  const char *all[] = {"lo", "docker0", "eth0", "virbr0", "eth1"};
  assert_int_equal(tpx__ifname_select(NULL, all, 5, sel), 2);
  assert_memory_equal(sel, ((unsigned char[]){0, 0, 1, 0, 1}), 5);
  const char *with_ib[] = {"eth0", "ib0", "lo", "ib1"};
  assert_int_equal(tpx__ifname_select("", with_ib, 4, sel), 2);
  assert_memory_equal(sel, ((unsigned char[]){0, 1, 0, 1}), 4);
  const char *fallback[] = {"lo", "virbr0", "docker0"};
  assert_int_equal(tpx__ifname_select(NULL, fallback, 3, sel), 1);
  assert_memory_equal(sel, ((unsigned char[]){0, 0, 1}), 3);
  assert_int_equal(tpx__ifname_select(NULL, fallback, 2, sel), 1); /* lo before virbr */
  assert_memory_equal(sel, ((unsigned char[]){1, 0}), 2);
  assert_int_equal(tpx__ifname_select(NULL, fallback + 1, 1, sel), 1);
  assert_int_equal(sel[0], 1);
  assert_int_equal(tpx__ifname_select(NULL, all, 0, sel), 0);
  /* Repeats (one entry per address) are chosen together. */
  const char *addrs[] = {"eth0", "lo", "eth0"};
  assert_int_equal(tpx__ifname_select(NULL, addrs, 3, sel), 2);
  assert_memory_equal(sel, ((unsigned char[]){1, 0, 1}), 3);
  /* Explicit lists take what they match, lo and docker included. */
  assert_int_equal(tpx__ifname_select("^eth", all, 5, sel), 3);
  assert_memory_equal(sel, ((unsigned char[]){1, 1, 0, 1, 0}), 5);
  assert_int_equal(tpx__ifname_select("=eth", all, 5, sel), 0);
  assert_int_equal(tpx__ifname_select("abcdefghijklmnopqrs", all, 5, sel), TPX_EINVAL);
}

/* A spec that selects nothing: the error names the variable and lists the
 * interfaces that exist, once each; no list names NCCL's default. */
static void test_none_names_what_exists(void **state) {
  (void)state;
  const char *names[] = {"lo", "eth0", "lo", "ens5"};
  char buf[768];
  tpx__ifname_none("=eht0", 0, "up with an IPv4 address", names, 4, buf, sizeof(buf));
  assert_non_null(strstr(buf, "TPX_SOCKET_IFNAME '=eht0'"));
  assert_non_null(strstr(buf, "NCCL_SOCKET_IFNAME"));
  assert_non_null(strstr(buf, "up with an IPv4 address: lo, eth0, ens5 "));
  tpx__ifname_none("^x,,", 1, "up with an address", names, 0, buf, sizeof(buf));
  assert_non_null(strstr(buf, "is malformed"));
  assert_non_null(strstr(buf, ": none"));
  tpx__ifname_none(NULL, 0, "up with an address", names, 1, buf, sizeof(buf));
  assert_non_null(strstr(buf, "TPX_SOCKET_IFNAME unset"));
  assert_non_null(strstr(buf, "NCCL's default"));
  assert_non_null(strstr(buf, "interfaces: lo"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_match_table),
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_tier),
      cmocka_unit_test(test_select),
      cmocka_unit_test(test_none_names_what_exists),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
