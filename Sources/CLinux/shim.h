#ifndef CALLEND_CLINUX_SHIM_H
#define CALLEND_CLINUX_SHIM_H
/* Linux interfaces Swift's Glibc module leaves out: epoll, eventfd, accept4, prctl. */
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <stddef.h>
#include <malloc.h>
#include <stdio.h>
#include <sys/inotify.h>

/* accept4 is declared only under _GNU_SOURCE, which would make this module's view of glibc
   differ from Swift's Glibc module; its prototype is stable, so declare it here. */
extern int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);

static inline int clinux_accept4(int fd, int flags) { return accept4(fd, NULL, NULL, flags); }
static inline unsigned int clinux_epollin(void) { return EPOLLIN; }
static inline unsigned int clinux_epollout(void) { return EPOLLOUT; }
static inline unsigned int clinux_epollrdhup(void) { return EPOLLRDHUP; }
static inline unsigned int clinux_epollhup(void) { return EPOLLHUP; }
static inline unsigned int clinux_epollerr(void) { return EPOLLERR; }
static inline int clinux_epoll_cloexec(void) { return EPOLL_CLOEXEC; }
static inline int clinux_efd_flags(void) { return EFD_NONBLOCK | EFD_CLOEXEC; }
/* Flushes what stdio buffered for standard output (stdout is shared mutable state to Swift;
   fflush(NULL) would also wait on the lock of a stdin another thread is blocked reading). */
static inline int clinux_flush_stdout(void) { return fflush(stdout); }
/* Gives memory malloc holds free back to the kernel, in every arena (glibc). */
static inline int clinux_malloc_trim(void) { return malloc_trim(0); }
/* prctl is variadic, which Swift does not import. Names the calling thread (15 bytes kept). */
static inline int clinux_set_thread_name(const char *name) { return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL); }
/* inotify: what the sound card watch listens for in /dev/snd (nodes made and removed). */
static inline int clinux_inotify_init(void) { return inotify_init1(IN_NONBLOCK | IN_CLOEXEC); }
static inline int clinux_inotify_watch_nodes(int fd, const char *path) {
    return inotify_add_watch(fd, path, IN_CREATE | IN_DELETE | IN_ATTRIB | IN_MOVED_TO | IN_MOVED_FROM);
}
#endif
