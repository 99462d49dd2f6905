#ifndef CALLEND_CHIREDIS_SHIM_H
#define CALLEND_CHIREDIS_SHIM_H
/* hiredis, the Redis project's C client: its protocol writer (commands as argument vectors) and
   its reply parser. The connection itself (a socket, TLS over it) is the room directory's own:
   Debian's hiredis 0.14 has no TLS. */
#include <hiredis/hiredis.h>

static inline int chiredis_reply_string(void) { return REDIS_REPLY_STRING; }
static inline int chiredis_reply_array(void) { return REDIS_REPLY_ARRAY; }
static inline int chiredis_reply_integer(void) { return REDIS_REPLY_INTEGER; }
static inline int chiredis_reply_nil(void) { return REDIS_REPLY_NIL; }
static inline int chiredis_reply_status(void) { return REDIS_REPLY_STATUS; }
static inline int chiredis_reply_error(void) { return REDIS_REPLY_ERROR; }
#endif
