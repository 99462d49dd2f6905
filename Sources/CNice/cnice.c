/* The libnice glue behind cnice.h. */
#include "cnice.h"
#include <nice/agent.h>
#include <glib.h>

/* From <nice/interfaces.h>, which includes <address.h> by a path only nice's own -I finds. */
GList *nice_interfaces_get_local_ips(gboolean include_loopback);
#include <string.h>

struct cnice_agent {
    GMainContext *context;
    GMainLoop *loop;
    GThread *thread;
    NiceAgent *agent;
    guint stream;
    void *user;
    cnice_event_fn on_event;
    cnice_data_fn on_data;
    gboolean closed;
    /* Set once the owner has let go: no callback reaches it after (atomic: set on any thread). */
    gint silenced;
    /* Destroyed from one of its own callbacks: the agent's thread frees it when its loop ends. */
    gboolean free_on_exit;
    gboolean has_local_address;
    /* The peer's credentials and candidates as given, for rechecks (cnice_agent_recheck). */
    gchar *remote_ufrag, *remote_password;
    GSList *remote_candidates;
    gboolean remote_done;
};

static const char *type_name(NiceCandidateType type) {
    switch (type) {
    case NICE_CANDIDATE_TYPE_HOST: return "host";
    case NICE_CANDIDATE_TYPE_SERVER_REFLEXIVE: return "srflx";
    case NICE_CANDIDATE_TYPE_PEER_REFLEXIVE: return "prflx";
    case NICE_CANDIDATE_TYPE_RELAYED: return "relay";
    default: return "unknown";
    }
}

static const char *transport_name(NiceCandidateTransport transport) {
    return transport == NICE_CANDIDATE_TRANSPORT_UDP ? "udp" : "tcp";
}

static void on_candidate(NiceAgent *agent, NiceCandidate *candidate, gpointer data) {
    cnice_agent *a = data;
    gchar *sdp = nice_agent_generate_local_candidate_sdp(agent, candidate);
    if (!sdp) return;
    if (!g_atomic_int_get(&a->silenced)) a->on_event(a->user, CNICE_EVENT_CANDIDATE, candidate->component_id, strncmp(sdp, "a=", 2) == 0 ? sdp + 2 : sdp);
    g_free(sdp);
}

static void on_gathering_done(NiceAgent *agent, guint stream, gpointer data) {
    cnice_agent *a = data;
    (void)agent;
    if (!g_atomic_int_get(&a->silenced)) a->on_event(a->user, CNICE_EVENT_GATHERING_DONE, stream, "");
}

static void on_state(NiceAgent *agent, guint stream, guint component, guint state, gpointer data) {
    cnice_agent *a = data;
    unsigned number;
    (void)agent; (void)stream; (void)component;
    switch (state) {
    case NICE_COMPONENT_STATE_GATHERING: number = 1; break;
    case NICE_COMPONENT_STATE_CONNECTING: number = 2; break;
    case NICE_COMPONENT_STATE_CONNECTED: number = 3; break;
    case NICE_COMPONENT_STATE_READY: number = 4; break;
    case NICE_COMPONENT_STATE_FAILED: number = 5; break;
    default: number = 0; break;
    }
    if (!g_atomic_int_get(&a->silenced)) a->on_event(a->user, CNICE_EVENT_STATE, number, "");
}

static void on_selected_pair(NiceAgent *agent, guint stream, guint component, NiceCandidate *local, NiceCandidate *remote, gpointer data) {
    cnice_agent *a = data;
    char laddr[NICE_ADDRESS_STRING_LEN], raddr[NICE_ADDRESS_STRING_LEN], text[256];
    (void)agent; (void)stream;
    nice_address_to_string(&local->addr, laddr);
    nice_address_to_string(&remote->addr, raddr);
    g_snprintf(text, sizeof text, "%s %s %s %u %s %s %s %u",
               type_name(local->type), transport_name(local->transport), laddr, nice_address_get_port(&local->addr),
               type_name(remote->type), transport_name(remote->transport), raddr, nice_address_get_port(&remote->addr));
    if (!g_atomic_int_get(&a->silenced)) a->on_event(a->user, CNICE_EVENT_SELECTED_PAIR, component, text);
}

static void on_data(NiceAgent *agent, guint stream, guint component, guint length, gchar *buffer, gpointer data) {
    cnice_agent *a = data;
    (void)agent; (void)stream; (void)component;
    if (length > 0 && !g_atomic_int_get(&a->silenced)) a->on_data(a->user, (const unsigned char *)buffer, length);
}

static void free_agent(cnice_agent *a);

static gpointer run_loop(gpointer data) {
    cnice_agent *a = data;
    g_main_context_push_thread_default(a->context);
    g_main_loop_run(a->loop);
    g_main_context_pop_thread_default(a->context);
    if (a->free_on_exit) {
        GThread *self = a->thread;
        free_agent(a);
        g_thread_unref(self); /* nobody joins: the thread's resources go when it returns */
    }
    return NULL;
}

/* Runs `fn` on the agent's thread and waits for it (or runs it at once when called there). */
typedef struct {
    void (*fn)(cnice_agent *a, void *arg);
    cnice_agent *agent;
    void *arg;
    GMutex mutex;
    GCond cond;
    gboolean done;
} task;

static gboolean run_task(gpointer data) {
    task *t = data;
    t->fn(t->agent, t->arg);
    g_mutex_lock(&t->mutex);
    t->done = TRUE;
    g_cond_signal(&t->cond);
    g_mutex_unlock(&t->mutex);
    return G_SOURCE_REMOVE;
}

static void perform(cnice_agent *a, void (*fn)(cnice_agent *a, void *arg), void *arg) {
    if (g_main_context_is_owner(a->context)) {
        fn(a, arg);
        return;
    }
    task t = { .fn = fn, .agent = a, .arg = arg, .done = FALSE };
    g_mutex_init(&t.mutex);
    g_cond_init(&t.cond);
    g_main_context_invoke_full(a->context, G_PRIORITY_HIGH, run_task, &t, NULL);
    g_mutex_lock(&t.mutex);
    while (!t.done) g_cond_wait(&t.cond, &t.mutex);
    g_mutex_unlock(&t.mutex);
    g_mutex_clear(&t.mutex);
    g_cond_clear(&t.cond);
}

cnice_agent *cnice_agent_create(int controlling, int relay_only, void *user, cnice_event_fn on_event, cnice_data_fn on_data_fn) {
    cnice_agent *a = g_new0(cnice_agent, 1);
    a->user = user;
    a->on_event = on_event;
    a->on_data = on_data_fn;
    a->context = g_main_context_new();
    a->loop = g_main_loop_new(a->context, FALSE);
    a->agent = nice_agent_new_full(a->context, NICE_COMPATIBILITY_RFC5245,
                                   NICE_AGENT_OPTION_REGULAR_NOMINATION | NICE_AGENT_OPTION_ICE_TRICKLE);
    if (!a->agent) {
        g_main_loop_unref(a->loop);
        g_main_context_unref(a->context);
        g_free(a);
        return NULL;
    }
    /* No UPnP requests to the LAN's router; no ICE-TCP host candidates (TURN over TCP is what
       crosses a firewall that blocks UDP). Keepalives are binding requests every 4-6 s (they keep
       NAT bindings and the peer's consent to us fresh); libnice's own consent freshness is off:
       libnice 0.1.21 sends one unretransmitted check every 4-6 s and ends consent 10 s after the
       last answer, so two checks lost at random (1 % of the time at 5 % loss each way) stopped
       the call. The transport keeps consent itself (BundleTransport); libnice still fails the
       pair after 50 s without an answered keepalive. */
    g_object_set(a->agent, "controlling-mode", controlling ? TRUE : FALSE, "upnp", FALSE, "ice-tcp", FALSE,
                 "force-relay", relay_only ? TRUE : FALSE, "keepalive-conncheck", TRUE, NULL);
    a->stream = nice_agent_add_stream(a->agent, 1);
    g_signal_connect(a->agent, "new-candidate-full", G_CALLBACK(on_candidate), a);
    g_signal_connect(a->agent, "candidate-gathering-done", G_CALLBACK(on_gathering_done), a);
    g_signal_connect(a->agent, "component-state-changed", G_CALLBACK(on_state), a);
    g_signal_connect(a->agent, "new-selected-pair-full", G_CALLBACK(on_selected_pair), a);
    nice_agent_attach_recv(a->agent, a->stream, 1, a->context, on_data, a);
    a->thread = g_thread_new("ice", run_loop, a);
    return a;
}

int cnice_agent_set_stun(cnice_agent *a, const char *ip, unsigned port) {
    g_object_set(a->agent, "stun-server", ip, "stun-server-port", port, NULL);
    return 1;
}

int cnice_agent_add_turn(cnice_agent *a, const char *ip, unsigned port, const char *username, const char *password, int over_tcp) {
    return nice_agent_set_relay_info(a->agent, a->stream, 1, ip, port, username, password,
                                     over_tcp ? NICE_RELAY_TYPE_TURN_TCP : NICE_RELAY_TYPE_TURN_UDP) ? 1 : 0;
}

void cnice_agent_local_credentials(cnice_agent *a, char *ufrag, unsigned ufrag_size, char *password, unsigned password_size) {
    gchar *u = NULL, *p = NULL;
    nice_agent_get_local_credentials(a->agent, a->stream, &u, &p);
    g_strlcpy(ufrag, u ? u : "", ufrag_size);
    g_strlcpy(password, p ? p : "", password_size);
    g_free(u);
    g_free(p);
}

typedef struct { const char *a; const char *b; int result; } args;

static int add_local(cnice_agent *a, const char *ip) {
    NiceAddress address;
    nice_address_init(&address);
    if (!nice_address_set_from_string(&address, ip)) return 0;
    a->has_local_address = TRUE;
    return nice_agent_add_local_address(a->agent, &address) ? 1 : 0;
}

int cnice_agent_add_local_address(cnice_agent *a, const char *ip) { return add_local(a, ip); }

static void do_gather(cnice_agent *a, void *arg) {
    /* A box with no network but loopback (a bench machine, the device lab VM) still calls
       itself: libnice leaves loopback out when it picks the interfaces. */
    if (!a->has_local_address) {
        /* Every interface's addresses but IPv6 link-local ones, which need a scope to be
           reached and only ever work on one link (browsers leave them out too). */
        GList *ips = nice_interfaces_get_local_ips(FALSE);
        for (GList *i = ips; i; i = i->next) {
            if (!g_str_has_prefix(i->data, "fe80:")) add_local(a, i->data);
        }
        if (!a->has_local_address) add_local(a, "127.0.0.1");
        g_list_free_full(ips, g_free);
    }
    ((args *)arg)->result = nice_agent_gather_candidates(a->agent, a->stream) ? 1 : 0;
}

int cnice_agent_gather(cnice_agent *a) {
    args x = {0};
    perform(a, do_gather, &x);
    return x.result;
}

static void do_remote_credentials(cnice_agent *a, void *arg) {
    args *x = arg;
    x->result = nice_agent_set_remote_credentials(a->agent, a->stream, x->a, x->b) ? 1 : 0;
    if (x->result) {
        g_free(a->remote_ufrag);
        g_free(a->remote_password);
        a->remote_ufrag = g_strdup(x->a);
        a->remote_password = g_strdup(x->b);
    }
}

int cnice_agent_set_remote_credentials(cnice_agent *a, const char *ufrag, const char *password) {
    args x = { ufrag, password, 0 };
    perform(a, do_remote_credentials, &x);
    return x.result;
}

/* Added on the agent's thread without waiting for it: an event handler on one agent's thread
   that hands a candidate to another agent (two agents in one process, whose threads would
   otherwise wait for each other) must not block. The line is parsed here, so a bad one is
   refused at once; libnice's parser takes the agent's lock and emits nothing. */
typedef struct { cnice_agent *agent; NiceCandidate *candidate; } remote_candidate;

static gboolean add_candidate_on_loop(gpointer data) {
    remote_candidate *r = data;
    GSList *list = g_slist_append(NULL, r->candidate);
    if (nice_agent_set_remote_candidates(r->agent->agent, r->agent->stream, 1, list) > 0 &&
        g_slist_length(r->agent->remote_candidates) < 64) {
        r->agent->remote_candidates = g_slist_append(r->agent->remote_candidates, nice_candidate_copy(r->candidate));
    }
    g_slist_free(list);
    return G_SOURCE_REMOVE;
}

static void free_remote_candidate(gpointer data) {
    remote_candidate *r = data;
    nice_candidate_free(r->candidate);
    g_free(r);
}

int cnice_agent_add_remote_candidate(cnice_agent *a, const char *line) {
    gchar *attribute = g_str_has_prefix(line, "a=") ? g_strdup(line) : g_strconcat("a=", line, NULL);
    NiceCandidate *candidate = nice_agent_parse_remote_candidate_sdp(a->agent, a->stream, attribute);
    g_free(attribute);
    if (!candidate) return -1;
    remote_candidate *r = g_new(remote_candidate, 1);
    r->agent = a;
    r->candidate = candidate;
    g_main_context_invoke_full(a->context, G_PRIORITY_HIGH, add_candidate_on_loop, r, free_remote_candidate);
    return 1;
}

static gboolean remote_done_on_loop(gpointer data) {
    cnice_agent *a = data;
    a->remote_done = TRUE;
    nice_agent_peer_candidate_gathering_done(a->agent, a->stream);
    return G_SOURCE_REMOVE;
}

/* A restart of the checks that keeps both sides' credentials: libnice forgets the pairs (and
   the peer's candidates) and takes the same credentials and candidates again, so the peer, which
   may be doing the same, answers without any signaling. The local candidates stay. */
static void do_recheck(cnice_agent *a, void *arg) {
    gchar *ufrag = NULL, *password = NULL;
    (void)arg;
    if (!a->remote_ufrag || !nice_agent_get_local_credentials(a->agent, a->stream, &ufrag, &password)) return;
    nice_agent_restart_stream(a->agent, a->stream);
    nice_agent_set_local_credentials(a->agent, a->stream, ufrag, password);
    nice_agent_set_remote_credentials(a->agent, a->stream, a->remote_ufrag, a->remote_password);
    if (a->remote_candidates) nice_agent_set_remote_candidates(a->agent, a->stream, 1, a->remote_candidates);
    if (a->remote_done) nice_agent_peer_candidate_gathering_done(a->agent, a->stream);
    g_free(ufrag);
    g_free(password);
}

void cnice_agent_recheck(cnice_agent *a) { perform(a, do_recheck, NULL); }

void cnice_agent_remote_gathering_done(cnice_agent *a) {
    g_main_context_invoke_full(a->context, G_PRIORITY_HIGH, remote_done_on_loop, a, NULL);
}

int cnice_agent_send(cnice_agent *a, const unsigned char *data, unsigned length) {
    return nice_agent_send(a->agent, a->stream, 1, length, (const gchar *)data);
}

/* Closing: TURN allocations are released, then the loop stops. A server that does not answer
   gets two seconds. */
static void closing_done(cnice_agent *a) {
    if (a->closed) return;
    a->closed = TRUE;
    g_main_loop_quit(a->loop);
}

static void on_closed(GObject *source, GAsyncResult *result, gpointer data) {
    (void)source; (void)result;
    closing_done(data);
}

static gboolean on_close_timeout(gpointer data) {
    closing_done(data);
    return G_SOURCE_REMOVE;
}

static gboolean start_closing(gpointer data) {
    cnice_agent *a = data;
    nice_agent_attach_recv(a->agent, a->stream, 1, NULL, NULL, NULL);
    g_signal_handlers_disconnect_matched(a->agent, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL, a);
    nice_agent_close_async(a->agent, on_closed, a);
    GSource *timeout = g_timeout_source_new(2000);
    g_source_set_callback(timeout, on_close_timeout, a, NULL);
    g_source_attach(timeout, a->context);
    g_source_unref(timeout);
    return G_SOURCE_REMOVE;
}

void cnice_agent_destroy(cnice_agent *a) {
    if (!a) return;
    g_atomic_int_set(&a->silenced, 1);
    if (g_thread_self() == a->thread) {
        /* From one of the agent's own callbacks (its owner's last reference went there): the
           thread cannot wait for itself. The closing starts once the callback has returned to
           the loop, and the thread frees the agent when the loop ends. */
        a->free_on_exit = TRUE;
        GSource *idle = g_idle_source_new();
        g_source_set_priority(idle, G_PRIORITY_HIGH);
        g_source_set_callback(idle, start_closing, a, NULL);
        g_source_attach(idle, a->context);
        g_source_unref(idle);
        return;
    }
    g_main_context_invoke_full(a->context, G_PRIORITY_HIGH, start_closing, a, NULL);
    g_thread_join(a->thread);
    free_agent(a);
}

static void free_agent(cnice_agent *a) {
    g_object_unref(a->agent);
    /* Whatever the closing left attached (its timeout, a late reply) goes with the context. */
    g_main_loop_unref(a->loop);
    g_main_context_unref(a->context);
    g_free(a->remote_ufrag);
    g_free(a->remote_password);
    g_slist_free_full(a->remote_candidates, (GDestroyNotify)nice_candidate_free);
    g_free(a);
}
