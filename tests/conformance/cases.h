/* The case table shared by cases.c (the cases) and main.c (the runner). */
#ifndef TPX_CONFORMANCE_CASES_H
#define TPX_CONFORMANCE_CASES_H

typedef struct cf_case {
  const char *name;
  int n_c2s, n_s2c; /* links opened by the setup, client->server first */
  int order;        /* CF_ORDER_* used by the setup's connect/accept loop */
} cf_case_t;

int cf_case_setup(void **state);
int cf_case_teardown(void **state);

void t_pattern_matches_testutil(void **state);
void t_properties(void **state);
void t_connect_accept_first(void **state);
void t_connect_connect_first(void **state);
void t_sizes(void **state);
void t_size_1gib(void **state);
void t_inflight(void **state);
void t_multi_comm(void **state);
void t_truncation_small(void **state);
void t_truncation_large(void **state);
void t_short_send(void **state);
void t_peer_close_recv_side(void **state);
void t_peer_close_send_side(void **state);
void t_close_after_last_send(void **state);
void t_peer_close_mid_message(void **state);
void t_many_comms(void **state);
void t_regmr_host(void **state);
void t_regmr_cuda(void **state);
void t_grouped_recv(void **state);
void t_close_idle(void **state);
void t_close_busy(void **state);
void t_bad_input(void **state);

#endif
