/* SPDX-License-Identifier: Apache-2.0 */
/* Linux interfaces Swift's Glibc module does not carry (epoll, signalfd, timerfd,
   eventfd, accept4, SO_PEERCRED, EVIOCGKEY, getrandom), and socket flags as plain ints. The functions that need
   _GNU_SOURCE live in clinux.c so that this header declares no glibc type differently
   from other modules. */
#ifndef SHUTTERD_CLINUX_H
#define SHUTTERD_CLINUX_H
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

static const int shutterd_sock_stream_cloexec = SOCK_STREAM | SOCK_CLOEXEC;
static const int shutterd_sock_nonblock = SOCK_NONBLOCK;

/* accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC. */
int shutterd_accept4(int fd);
/* SO_PEERCRED of a connected Unix socket; 0 or -1 with errno. */
int shutterd_peercred(int fd, int *pid, unsigned *uid, unsigned *gid);
/* EVIOCGKEY: the state of every key of an evdev node, one bit per code, into bits[len];
   the ioctl's result (the bytes written, or -1 with errno). */
int shutterd_evdev_key_state(int fd, unsigned char *bits, int len);
/* malloc_trim(0) (glibc's malloc.h, which Swift's Glibc module does not carry): the heap's
   free pages go back to the kernel, those between live blocks too; cannot fail. */
void shutterd_trim_heap(void);
/* Unmaps the pages of the program's own read-only segments (code, read-only data) with
   madvise(MADV_DONTNEED): they stay in the page cache, and what runs next faults back in
   from there. Segments that are written (data, relocations) are left alone. The bytes
   advised, or -1 with errno when a madvise failed. */
long shutterd_release_code(void);
/* strerrorname_np (glibc 2.32, _GNU_SOURCE): the errno's name, "EACCES"; NULL for a
   number glibc has no name for. */
const char *shutterd_errno_name(int e);
/* prctl(PR_SET_NAME): the calling thread's name (ps -L, /proc/PID/task/TID/comm), cut at
   15 bytes; 0, or -1 with errno. */
int shutterd_name_thread(const char *name);
/* gettid(): the calling thread's id (the TID of /proc/PID/task/TID); cannot fail. */
int shutterd_thread_id(void);
#endif
