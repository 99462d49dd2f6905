// The test process's Swift tasks on a pool of CALLEND_TEST_THREADS threads (default 4) instead
// of the runtime's, which on Linux has one thread per core. Most tests are synchronous and block
// a thread for their whole run (a call, a service, a subprocess), so on two cores two of them at
// a time ran while every other test, quick ones included, waited for a thread: the tests' wall
// time was the sum of the blocking ones' over two, with the processor mostly idle.
//
// The runtime's hook for global jobs is the documented way in (swift/Runtime/Concurrency.h: a
// job enqueued on the global executor goes to the hook, which may run it where it likes); a job
// is run as the runtime's own executor runs it, with swift_job_run on the generic executor.
// Delayed jobs (Task.sleep) still wait on the runtime's timer and come back through the hook.
// Linked into the test binary only, through TestSupport.

#define _GNU_SOURCE
#include "ctestpool.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct Job Job;
typedef struct {
    void *identity;
    uintptr_t implementation;
} SerialExecutorRef;
typedef void (*EnqueueOriginal)(Job *job) __attribute__((swiftcall));
typedef void (*EnqueueHook)(Job *job, EnqueueOriginal original) __attribute__((swiftcall));

extern EnqueueHook swift_task_enqueueGlobal_hook;
extern void swift_job_run(Job *job, SerialExecutorRef executor) __attribute__((swiftcall));

typedef struct Entry {
    Job *job;
    struct Entry *next;
} Entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready = PTHREAD_COND_INITIALIZER;
static Entry *head, *tail;
static int width, started, idle, queued;

static void *worker(void *unused) {
    (void)unused;
    pthread_setname_np(pthread_self(), "test-pool");
    // As the runtime's own threads (libdispatch's workers): no signal but a fault's comes here,
    // so a child process started from a test inherits every signal blocked, as before.
    sigset_t mask;
    sigfillset(&mask);
    sigdelset(&mask, SIGSEGV);
    sigdelset(&mask, SIGBUS);
    sigdelset(&mask, SIGILL);
    sigdelset(&mask, SIGFPE);
    sigdelset(&mask, SIGABRT);
    sigdelset(&mask, SIGTRAP);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    for (;;) {
        pthread_mutex_lock(&lock);
        idle += 1;
        while (head == NULL) pthread_cond_wait(&ready, &lock);
        idle -= 1;
        Entry *entry = head;
        queued -= 1;
        head = entry->next;
        if (head == NULL) tail = NULL;
        pthread_mutex_unlock(&lock);
        Job *job = entry->job;
        free(entry);
        swift_job_run(job, (SerialExecutorRef){NULL, 0});
    }
    return NULL;
}

__attribute__((swiftcall)) static void enqueue(Job *job, EnqueueOriginal original) {
    Entry *entry = malloc(sizeof *entry);
    if (entry == NULL) {
        original(job);
        return;
    }
    entry->job = job;
    entry->next = NULL;
    int spawn = 0;
    pthread_mutex_lock(&lock);
    if (tail != NULL) tail->next = entry; else head = entry;
    tail = entry;
    queued += 1;
    // A thread more while the jobs waiting outnumber the threads free, up to the width: a job
    // never waits behind a blocked one while the pool has room.
    if (queued > idle && started < width) {
        started += 1;
        spawn = 1;
    } else {
        pthread_cond_signal(&ready);
    }
    pthread_mutex_unlock(&lock);
    if (spawn) {
        pthread_t thread;
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&thread, &attributes, worker, NULL) != 0) {
            fprintf(stderr, "test pool: cannot start a thread\n");
            abort();
        }
        pthread_attr_destroy(&attributes);
    }
}

int ctestpool_threads(void) {
    pthread_mutex_lock(&lock);
    int count = started;
    pthread_mutex_unlock(&lock);
    return count;
}

__attribute__((constructor)) static void install(void) {
    const char *text = getenv("CALLEND_TEST_THREADS");
    width = text != NULL ? atoi(text) : 4;
    if (width <= 0) return;  // 0: the runtime's own pool
    swift_task_enqueueGlobal_hook = enqueue;
}
