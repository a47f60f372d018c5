/* Peer-supplied strings (endpoint names, error texts) on their way into a
 * log line or an error string: every byte outside printable ASCII, and the
 * backslash, written as an escape, so a peer cannot start a line, forge
 * one, or send terminal control sequences (docs/SECURITY.md, "Logs"). */
#ifndef TPX_COMMON_PRINTABLE_H
#define TPX_COMMON_PRINTABLE_H

#include <stddef.h>

/* Copies the first len bytes of in (or up to its NUL) into out (cap >= 1
 * bytes, always NUL-terminated): a byte outside 0x20..0x7e as \xNN, a
 * backslash as \\; cut before an escape that would not fit whole. Returns
 * out. */
char *tpx__printable(char *out, size_t cap, const char *in, size_t len);

#endif
