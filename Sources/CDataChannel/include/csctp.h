#ifndef CSCTP_H
#define CSCTP_H
#include <stddef.h>
#include <stdint.h>

/* A thin layer over usrsctp for data channels (RFC 8831): one SCTP association per peer,
 * carried by the caller (over DTLS) through AF_CONN, so usrsctp never touches a socket. The
 * callbacks run on usrsctp's threads and must not call back into this layer. */

enum csctp_event_kind {
    CSCTP_UP = 1,              /* the association is established */
    CSCTP_DOWN = 2,            /* lost, shut down, or it could not be set up */
    CSCTP_INCOMING_RESET = 3,  /* the peer reset these streams of its own (it closed channels) */
    CSCTP_OUTGOING_RESET = 4,  /* our reset of these streams is done */
};

typedef void (*csctp_output_fn)(void *context, const void *packet, size_t length);
typedef void (*csctp_message_fn)(void *context, const void *data, size_t length, uint16_t stream, uint32_t ppid, int complete);
typedef void (*csctp_event_fn)(void *context, int kind, const uint16_t *streams, int count);

/* Once per process, before the first association; the callbacks serve every association. */
void csctp_setup(csctp_output_fn output, csctp_message_fn message, csctp_event_fn event);

typedef struct csctp csctp;

/* An association between local and remote SCTP ports (a=sctp-port), its packets given to
 * `output` with `context`. Returns NULL (errno set) when usrsctp refuses. */
csctp *csctp_open(void *context, uint16_t local_port, uint16_t remote_port, uint32_t mtu);
/* Starts the handshake (both sides may: SCTP handles the simultaneous open). */
int csctp_connect(csctp *association);
/* One SCTP packet from the peer (what DTLS delivered). */
void csctp_input(csctp *association, const void *packet, size_t length);
/* One message on `stream`. max_retransmits >= 0 or max_lifetime_ms >= 0 make it partially
 * reliable (RFC 3758). Blocks while the send buffer is full. Returns 0, or -1 with errno. */
int csctp_send(csctp *association, uint16_t stream, uint32_t ppid, const void *data, size_t length,
               int unordered, int max_retransmits, int max_lifetime_ms);
/* For tests of a peer that misbehaves: sends `data` as the next part of a message on `stream`
 * that this call does not end (explicit EOR, RFC 6458 8.1.26): a peer can send parts of one
 * message forever, and the receiver must not keep them all. */
int csctp_send_part(csctp *association, uint16_t stream, uint32_t ppid, const void *data, size_t length);
/* Resets our outgoing stream (RFC 6525): how a data channel closes (RFC 8831 6.7). */
int csctp_reset_stream(csctp *association, uint16_t stream);
/* Aborts the association and stops every callback for it; the memory goes later. */
void csctp_close(csctp *association);

#endif
