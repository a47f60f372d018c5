/* The authentication key's checks (docs/SECURITY.md), shared by the
 * environment and the API (config.c): a key's length, and reading one from
 * a file nobody else may read. Errors: TPX_EINVAL with tpx_err_quiet's
 * detail naming the problem; the caller reports it. */
#ifndef TPX_COMMON_KEYFILE_H
#define TPX_COMMON_KEYFILE_H

#include <stddef.h>
#include <stdint.h>

/* len within TPX_AUTH_KEY_MIN..TPX_AUTH_KEY_MAX; `what` names the source. */
int tpx__key_len_check(size_t len, const char *what);
/* Read the key from path into out (TPX_AUTH_KEY_MAX bytes): a regular file
 * owned by this user or root, no permission bits for group or others (bar
 * execute), one trailing "\n" or "\r\n" dropped, then the length checked. */
int tpx__keyfile_read(const char *path, uint8_t *out, size_t *len);

#endif
