#ifndef CALLEND_CNICE_H
#define CALLEND_CNICE_H
/* One libnice ICE agent (RFC 8445 full ICE, regular nomination, trickle, binding requests as
   keepalives; consent freshness is kept by the caller) with one stream of one component, running on a GLib main loop on a thread of its
   own ("ice"). Plain C types only, so that Swift never imports GLib's headers. Calls run on the
   agent's thread: most wait for it; adding remote candidates and their end does not (an event
   handler may add a candidate to another agent), and cnice_agent_send runs on the caller's
   thread under libnice's agent lock. Events and received data arrive on the agent's thread. */

typedef struct cnice_agent cnice_agent;

enum {
    CNICE_EVENT_CANDIDATE = 1,      /* text: "candidate:..." (no "a=") */
    CNICE_EVENT_GATHERING_DONE = 2,
    CNICE_EVENT_STATE = 3,          /* number: 0 disconnected, 1 gathering, 2 connecting, 3 connected, 4 ready, 5 failed */
    CNICE_EVENT_SELECTED_PAIR = 4,  /* text: "ltype lproto laddr lport rtype rproto raddr rport" */
};

typedef void (*cnice_event_fn)(void *user, int kind, unsigned number, const char *text);
typedef void (*cnice_data_fn)(void *user, const unsigned char *data, unsigned length);

/* NULL when GLib or libnice cannot be set up. */
cnice_agent *cnice_agent_create(int controlling, int relay_only, void *user, cnice_event_fn on_event, cnice_data_fn on_data);
/* `ip` must be an address literal. Set before gathering. Return 1 on success. */
int cnice_agent_set_stun(cnice_agent *agent, const char *ip, unsigned port);
int cnice_agent_add_turn(cnice_agent *agent, const char *ip, unsigned port, const char *username, const char *password, int over_tcp);
/* Gathers host candidates on `ip` only (call once per address, before gathering); without any,
   every interface but loopback is used, and loopback when there is no other. */
int cnice_agent_add_local_address(cnice_agent *agent, const char *ip);
/* Copies at most size-1 bytes of each, NUL-terminated. */
void cnice_agent_local_credentials(cnice_agent *agent, char *ufrag, unsigned ufrag_size, char *password, unsigned password_size);
int cnice_agent_gather(cnice_agent *agent);
int cnice_agent_set_remote_credentials(cnice_agent *agent, const char *ufrag, const char *password);
/* A candidate line with or without "a=": parsed at once (-1 when libnice cannot read it), then
   added on the agent's thread without waiting. */
int cnice_agent_add_remote_candidate(cnice_agent *agent, const char *line);
void cnice_agent_remote_gathering_done(cnice_agent *agent);
/* Checks every pair again with the same credentials on both sides (after the path was lost):
   the path is found again when it returns, without signaling. Waits for the agent's thread. */
void cnice_agent_recheck(cnice_agent *agent);
/* The bytes sent, or -1 (no selected pair yet, or it failed). Any thread. */
int cnice_agent_send(cnice_agent *agent, const unsigned char *data, unsigned length);
/* Releases TURN allocations (two seconds at most), stops the loop, joins its thread, frees all.
   No callback comes after it starts. Called from one of the agent's own callbacks, it returns at
   once and the agent's thread does the rest after the callback. */
void cnice_agent_destroy(cnice_agent *agent);

#endif
