/* The messages the GPUDirect-TCPX plugin exchanges with RxDM over its UNIX
 * sockets, decoded and encoded by hand (no protobuf library): each message is
 * a 2-byte big-endian length and a serialized proto2 `UnixSocketProto`
 * (the plugin's src/rx_buf_mgr_client/proto/unix_socket_proto.proto and
 * unix_socket_connection.cc; RxDM's proto/ and src/unix_socket_connection.cc).
 * A file descriptor travels instead as one dummy byte with SCM_RIGHTS. Only
 * the fields either side uses are known here; others are skipped, as proto2
 * does. Everything read is checked: a decode failure is an error, never a
 * crash. */
#ifndef RXDM_PROTO_H
#define RXDM_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define RXDM_STR_MAX 64 /* longest IP address, PCI address or raw string kept */
#define RXDM_FRAME_MAX 65535

enum rxdm_kind {
  RXDM_EMPTY = 0,      /* no payload field set */
  RXDM_RAW = 1,        /* raw_bytes */
  RXDM_RULE = 2,       /* flow_steer_rule_request */
  RXDM_QUEUE_QUERY = 3,
  RXDM_QUEUE_RESPONSE = 4,
  RXDM_REGISTER = 6,   /* application_register_request */
};

struct rxdm_addr {
  int has_ip, has_port;
  char ip[RXDM_STR_MAX];
  int64_t port;
};

struct rxdm_msg {
  enum rxdm_kind kind;
  char raw[RXDM_STR_MAX]; /* RXDM_RAW (NUL-terminated; raw_len bytes) */
  size_t raw_len;
  /* RXDM_RULE */
  int has_flow_type, has_queue_id, has_gpu;
  int64_t flow_type, queue_id;
  struct rxdm_addr src, dst;
  char gpu[RXDM_STR_MAX];
  /* RXDM_QUEUE_QUERY: gpu; RXDM_REGISTER: */
  int has_register, register_client;
};

/* Decodes one UnixSocketProto of n bytes. 0, or -EBADMSG (malformed),
 * -EMSGSIZE (a string longer than RXDM_STR_MAX - 1). */
int rxdm_decode(const uint8_t *buf, size_t n, struct rxdm_msg *m);

/* Encodes a UnixSocketProto with raw_bytes = text, and, when code != 0, the
 * status RxDM adds to its errors (field 5, google.rpc.Status {code, message}),
 * framed (length first) into out. Returns the frame's length, or -EMSGSIZE. */
int rxdm_encode_raw(uint8_t *out, size_t cap, const char *text, int code);
/* A framed QueueIdResponse with the given queue ids. */
int rxdm_encode_queues(uint8_t *out, size_t cap, const int *ids, int n);
/* A framed request (for tests and clients): a rule request, a registration,
 * or raw bytes. */
int rxdm_encode_rule(uint8_t *out, size_t cap, const struct rxdm_msg *m);
int rxdm_encode_register(uint8_t *out, size_t cap, int register_client);
int rxdm_encode_request_raw(uint8_t *out, size_t cap, const char *text);

#endif
