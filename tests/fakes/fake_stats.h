/* What the fake net plugins record, read by tests through
 * dlsym(dlopen(path, RTLD_NOLOAD), "fake_stats"). */
#ifndef TPX_FAKE_STATS_H
#define TPX_FAKE_STATS_H

#include <stddef.h>
#include <stdint.h>

struct fake_stats {
  int init, devices, props, listen, connect, accept, regmr, deregmr;
  int isend, irecv, iflush, test, close_send, close_recv, close_listen;
  int finalize, set_net_attr, get_device_mr, irecv_consumed;
  int version;       /* ABI version whose init ran last */
  int logger_set;    /* init received a non-NULL logger */
  uint64_t comm_id;  /* v11 init */
  int traffic_class; /* v11 init config / v10 connect config */
  int ctx_ok;        /* v11 listen/connect saw the ctx init returned */
  size_t last_isend_size;
  size_t last_regmr_size;
  size_t last_irecv_size;
  void *accept_slot;   /* the ncclNetDeviceHandle** accept received last */
  void *accept_dev;    /* *accept_slot at that time */
  void *connect_dev;   /* *sendDevComm connect received last */
  int connect_pending; /* connect calls answered "not yet" */
  int accept_pending;  /* accept calls answered "not yet" */
  int accept_overlap;  /* accept calls entered while another was running */
  int live_comms;      /* comms open now (listen + send + recv) */
  int live_reqs;       /* requests not yet completed by test */
  int live_mrs;
  int listen_dev[2];       /* listen calls per device */
  int connect_dev_calls[2]; /* connect calls (retries included) per device */
  /* Failure injection, set by a test: the next fail_accepts accepts and the
   * next fail_connects connects that would complete a comm fail instead,
   * with ncclInternalError / ncclSystemError, or fail_code when it is set
   * (an ncclResult); accept_failed / connect_failed count them. */
  int fail_accepts, fail_connects, fail_code;
  int accept_failed, connect_failed;
};

#endif
