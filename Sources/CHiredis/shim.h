#ifndef CALLEND_CHIREDIS_SHIM_H
#define CALLEND_CHIREDIS_SHIM_H
/* hiredis, the Redis project's C client: connections, commands as argument vectors, pipelining
   and the replies' parser. Used by the signaling service's room directory across nodes. */
#include <hiredis/hiredis.h>
#include <sys/socket.h>

/* Connecting waits `connect_ms` at most, each reply `reply_ms`. */
static inline redisContext *chiredis_connect(const char *host, int port, int connect_ms, int reply_ms) {
    struct timeval connecting = { connect_ms / 1000, (connect_ms % 1000) * 1000 };
    struct timeval replying = { reply_ms / 1000, (reply_ms % 1000) * 1000 };
    redisContext *c = redisConnectWithTimeout(host, port, connecting);
    if (c && !c->err) redisSetTimeout(c, replying);
    return c;
}
/* No read timeout: a subscriber waits for messages as long as the connection lives. */
static inline void chiredis_wait_forever(redisContext *c) {
    struct timeval tv = { 0, 0 };
    redisSetTimeout(c, tv);
    redisEnableKeepAlive(c);
}
/* Wakes a thread blocked reading the connection: its read then fails. */
static inline void chiredis_shutdown(redisContext *c) { shutdown(c->fd, SHUT_RDWR); }
static inline int chiredis_reply_string(void) { return REDIS_REPLY_STRING; }
static inline int chiredis_reply_array(void) { return REDIS_REPLY_ARRAY; }
static inline int chiredis_reply_integer(void) { return REDIS_REPLY_INTEGER; }
static inline int chiredis_reply_nil(void) { return REDIS_REPLY_NIL; }
static inline int chiredis_reply_status(void) { return REDIS_REPLY_STATUS; }
static inline int chiredis_reply_error(void) { return REDIS_REPLY_ERROR; }
#endif
