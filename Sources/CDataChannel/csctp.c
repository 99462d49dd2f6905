#include "csctp.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <usrsctp.h>

struct csctp {
    void *context;
    struct socket *socket;
    uint16_t remote_port;
    uint32_t mtu;
    int closed;               /* read by usrsctp's threads: atomics */
    /* Senders hold it shared around usrsctp's calls; close holds it alone. */
    pthread_rwlock_t use;
    /* Signalled when the send buffer has room again, and on close. */
    pthread_mutex_t room_lock;
    pthread_cond_t room;
    struct timespec closed_at;
    struct csctp *next_closed;
};

static csctp_output_fn output_callback;
static csctp_message_fn message_callback;
static csctp_event_fn event_callback;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* Closed associations, freed once usrsctp can no longer name them (its timers may still run
 * for a closed socket a little while). */
static pthread_mutex_t graveyard_lock = PTHREAD_MUTEX_INITIALIZER;
static struct csctp *graveyard;

static int is_closed(struct csctp *c) { return __atomic_load_n(&c->closed, __ATOMIC_ACQUIRE); }

static int conn_output(void *address, void *buffer, size_t length, uint8_t tos, uint8_t set_df) {
    (void)tos;
    (void)set_df;
    struct csctp *c = address;
    if (!is_closed(c)) output_callback(c->context, buffer, length);
    return 0;
}

static void start(void) {
    usrsctp_init(0, conn_output, NULL);
    /* No ECN over DTLS (there is no IP header to carry it), as WebRTC stacks do. */
    usrsctp_sysctl_set_sctp_ecn_enable(0);
    /* Acknowledge within 20 ms rather than 200 (message latency on a quiet channel). */
    usrsctp_sysctl_set_sctp_delayed_sack_time_default(20);
}

void csctp_setup(csctp_output_fn output, csctp_message_fn message, csctp_event_fn event) {
    output_callback = output;
    message_callback = message;
    event_callback = event;
    pthread_once(&once, start);
}

static void notification(struct csctp *c, const union sctp_notification *n, size_t length) {
    if (length < sizeof(n->sn_header) || n->sn_header.sn_length > length) return;
    switch (n->sn_header.sn_type) {
    case SCTP_ASSOC_CHANGE:
        switch (n->sn_assoc_change.sac_state) {
        case SCTP_COMM_UP: event_callback(c->context, CSCTP_UP, NULL, 0); break;
        case SCTP_COMM_LOST:
        case SCTP_SHUTDOWN_COMP:
        case SCTP_CANT_STR_ASSOC: event_callback(c->context, CSCTP_DOWN, NULL, 0); break;
        default: break;
        }
        break;
    case SCTP_STREAM_RESET_EVENT: {
        const struct sctp_stream_reset_event *r = &n->sn_strreset_event;
        if (r->strreset_flags & (SCTP_STREAM_RESET_DENIED | SCTP_STREAM_RESET_FAILED)) break;
        int count = (int)((r->strreset_length - sizeof(*r)) / sizeof(uint16_t));
        if (r->strreset_flags & SCTP_STREAM_RESET_INCOMING_SSN)
            event_callback(c->context, CSCTP_INCOMING_RESET, r->strreset_stream_list, count);
        if (r->strreset_flags & SCTP_STREAM_RESET_OUTGOING_SSN)
            event_callback(c->context, CSCTP_OUTGOING_RESET, r->strreset_stream_list, count);
        break;
    }
    default:
        break;
    }
}

static int receive(struct socket *sock, union sctp_sockstore address, void *data, size_t length,
                   struct sctp_rcvinfo info, int flags, void *ulp) {
    (void)sock;
    (void)address;
    struct csctp *c = ulp;
    if (data == NULL) return 1;
    if (!is_closed(c)) {
        if (flags & MSG_NOTIFICATION) {
            notification(c, data, length);
        } else {
            message_callback(c->context, data, length, info.rcv_sid, ntohl(info.rcv_ppid), (flags & MSG_EOR) != 0);
        }
    }
    free(data);
    return 1;
}

static void bury_old(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&graveyard_lock);
    struct csctp **link = &graveyard;
    while (*link) {
        struct csctp *c = *link;
        if (now.tv_sec - c->closed_at.tv_sec > 60) {
            *link = c->next_closed;
            free(c);
        } else {
            link = &c->next_closed;
        }
    }
    pthread_mutex_unlock(&graveyard_lock);
}

static struct sockaddr_conn address_of(struct csctp *c, uint16_t port) {
    struct sockaddr_conn a;
    memset(&a, 0, sizeof(a));
    a.sconn_family = AF_CONN;
    a.sconn_port = htons(port);
    a.sconn_addr = c;
    return a;
}

static int room_again(struct socket *sock, uint32_t free_space, void *ulp) {
    (void)sock;
    (void)free_space;
    struct csctp *c = ulp;
    pthread_mutex_lock(&c->room_lock);
    pthread_cond_broadcast(&c->room);
    pthread_mutex_unlock(&c->room_lock);
    return 1;
}

csctp *csctp_open(void *context, uint16_t local_port, uint16_t remote_port, uint32_t mtu) {
    bury_old();
    struct csctp *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    pthread_rwlock_init(&c->use, NULL);
    pthread_mutex_init(&c->room_lock, NULL);
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&c->room, &attributes);
    pthread_condattr_destroy(&attributes);
    c->context = context;
    c->remote_port = remote_port;
    c->mtu = mtu;
    usrsctp_register_address(c);
    /* room_again runs when a quarter of the send buffer is free. */
    c->socket = usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP, receive, room_again, (1 << 20) / 4, c);
    if (!c->socket) goto fail;
    if (usrsctp_set_non_blocking(c->socket, 1) < 0) goto fail;
    /* Closing aborts: no lingering shutdown handshake with a peer that may be gone. */
    struct linger linger = {1, 0};
    if (usrsctp_setsockopt(c->socket, SOL_SOCKET, SO_LINGER, &linger, sizeof(linger)) < 0) goto fail;
    struct sctp_assoc_value reset = {SCTP_ALL_ASSOC, SCTP_ENABLE_RESET_STREAM_REQ};
    if (usrsctp_setsockopt(c->socket, IPPROTO_SCTP, SCTP_ENABLE_STREAM_RESET, &reset, sizeof(reset)) < 0) goto fail;
    int on = 1;
    if (usrsctp_setsockopt(c->socket, IPPROTO_SCTP, SCTP_NODELAY, &on, sizeof(on)) < 0) goto fail;
    uint16_t events[] = {SCTP_ASSOC_CHANGE, SCTP_STREAM_RESET_EVENT};
    for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
        struct sctp_event e;
        memset(&e, 0, sizeof(e));
        e.se_assoc_id = SCTP_ALL_ASSOC;
        e.se_type = events[i];
        e.se_on = 1;
        if (usrsctp_setsockopt(c->socket, IPPROTO_SCTP, SCTP_EVENT, &e, sizeof(e)) < 0) goto fail;
    }
    struct sctp_initmsg init;
    memset(&init, 0, sizeof(init));
    init.sinit_num_ostreams = 1024;
    init.sinit_max_instreams = 1024;
    if (usrsctp_setsockopt(c->socket, IPPROTO_SCTP, SCTP_INITMSG, &init, sizeof(init)) < 0) goto fail;
    int buffer = 1 << 20;
    usrsctp_setsockopt(c->socket, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
    usrsctp_setsockopt(c->socket, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
    struct sockaddr_conn local = address_of(c, local_port);
    if (usrsctp_bind(c->socket, (struct sockaddr *)&local, sizeof(local)) < 0) goto fail;
    return c;
fail: {
        int saved = errno;
        if (c->socket) usrsctp_close(c->socket);
        usrsctp_deregister_address(c);
        /* usrsctp saw the address: it goes to the graveyard, not free(). */
        __atomic_store_n(&c->closed, 1, __ATOMIC_RELEASE);
        clock_gettime(CLOCK_MONOTONIC, &c->closed_at);
        pthread_mutex_lock(&graveyard_lock);
        c->next_closed = graveyard;
        graveyard = c;
        pthread_mutex_unlock(&graveyard_lock);
        errno = saved;
        return NULL;
    }
}

int csctp_connect(csctp *c) {
    struct sockaddr_conn remote = address_of(c, c->remote_port);
    if (usrsctp_connect(c->socket, (struct sockaddr *)&remote, sizeof(remote)) < 0 && errno != EINPROGRESS) return -1;
    /* The path MTU is what fits a DTLS record in one datagram under ICE's limit: no discovery. */
    struct sctp_paddrparams params;
    memset(&params, 0, sizeof(params));
    memcpy(&params.spp_address, &remote, sizeof(remote));
    params.spp_flags = SPP_PMTUD_DISABLE;
    params.spp_pathmtu = c->mtu;
    usrsctp_setsockopt(c->socket, IPPROTO_SCTP, SCTP_PEER_ADDR_PARAMS, &params, sizeof(params));
    return 0;
}

void csctp_input(csctp *c, const void *packet, size_t length) {
    pthread_rwlock_rdlock(&c->use);
    if (!is_closed(c)) usrsctp_conninput(c, packet, length, 0);
    pthread_rwlock_unlock(&c->use);
}

static int send_message(csctp *c, uint16_t stream, uint32_t ppid, const void *data, size_t length,
                        int unordered, int max_retransmits, int max_lifetime_ms, int ends);

int csctp_send(csctp *c, uint16_t stream, uint32_t ppid, const void *data, size_t length,
               int unordered, int max_retransmits, int max_lifetime_ms) {
    return send_message(c, stream, ppid, data, length, unordered, max_retransmits, max_lifetime_ms, 1);
}

static int send_message(csctp *c, uint16_t stream, uint32_t ppid, const void *data, size_t length,
                        int unordered, int max_retransmits, int max_lifetime_ms, int ends) {
    if (is_closed(c)) {
        errno = ENOTCONN;
        return -1;
    }
    struct sctp_sendv_spa spa;
    memset(&spa, 0, sizeof(spa));
    spa.sendv_flags = SCTP_SEND_SNDINFO_VALID;
    spa.sendv_sndinfo.snd_sid = stream;
    spa.sendv_sndinfo.snd_ppid = htonl(ppid);
    spa.sendv_sndinfo.snd_flags = (ends ? SCTP_EOR : 0) | (unordered ? SCTP_UNORDERED : 0);
    if (max_retransmits >= 0) {
        spa.sendv_flags |= SCTP_SEND_PRINFO_VALID;
        spa.sendv_prinfo.pr_policy = SCTP_PR_SCTP_RTX;
        spa.sendv_prinfo.pr_value = (uint32_t)max_retransmits;
    } else if (max_lifetime_ms >= 0) {
        spa.sendv_flags |= SCTP_SEND_PRINFO_VALID;
        spa.sendv_prinfo.pr_policy = SCTP_PR_SCTP_TTL;
        spa.sendv_prinfo.pr_value = (uint32_t)max_lifetime_ms;
    }
    /* A full send buffer (a large transfer ahead of the peer's window): wait for room, or the close. */
    for (;;) {
        pthread_rwlock_rdlock(&c->use);
        ssize_t sent = is_closed(c) ? -1 : usrsctp_sendv(c->socket, data, length, NULL, 0, &spa, sizeof(spa), SCTP_SENDV_SPA, 0);
        int error = is_closed(c) ? ENOTCONN : errno;
        pthread_rwlock_unlock(&c->use);
        if (sent >= 0) return 0;
        if (error != EWOULDBLOCK && error != EAGAIN) {
            errno = error;
            return -1;
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += 50 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec += 1;
            until.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&c->room_lock);
        pthread_cond_timedwait(&c->room, &c->room_lock, &until);
        pthread_mutex_unlock(&c->room_lock);
    }
}

int csctp_send_part(csctp *c, uint16_t stream, uint32_t ppid, const void *data, size_t length) {
    int on = 1;
    pthread_rwlock_rdlock(&c->use);
    int explicit_eor = is_closed(c) ? -1 : usrsctp_setsockopt(c->socket, IPPROTO_SCTP, SCTP_EXPLICIT_EOR, &on, sizeof(on));
    pthread_rwlock_unlock(&c->use);
    if (explicit_eor < 0) return -1;
    return send_message(c, stream, ppid, data, length, 0, -1, -1, 0);
}

int csctp_reset_stream(csctp *c, uint16_t stream) {
    size_t size = sizeof(struct sctp_reset_streams) + sizeof(uint16_t);
    struct sctp_reset_streams *r = calloc(1, size);
    if (!r) return -1;
    r->srs_assoc_id = SCTP_ALL_ASSOC;
    r->srs_flags = SCTP_STREAM_RESET_OUTGOING;
    r->srs_number_streams = 1;
    r->srs_stream_list[0] = stream;
    pthread_rwlock_rdlock(&c->use);
    int result = is_closed(c) ? -1 : usrsctp_setsockopt(c->socket, IPPROTO_SCTP, SCTP_RESET_STREAMS, r, (socklen_t)size);
    pthread_rwlock_unlock(&c->use);
    free(r);
    return result;
}

void csctp_close(csctp *c) {
    if (__atomic_exchange_n(&c->closed, 1, __ATOMIC_ACQ_REL)) return;
    pthread_mutex_lock(&c->room_lock);
    pthread_cond_broadcast(&c->room);
    pthread_mutex_unlock(&c->room_lock);
    pthread_rwlock_wrlock(&c->use);
    usrsctp_close(c->socket);
    pthread_rwlock_unlock(&c->use);
    usrsctp_deregister_address(c);
    clock_gettime(CLOCK_MONOTONIC, &c->closed_at);
    pthread_mutex_lock(&graveyard_lock);
    c->next_closed = graveyard;
    graveyard = c;
    pthread_mutex_unlock(&graveyard_lock);
}
