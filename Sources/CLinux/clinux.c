/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/socket.h>
#include "clinux.h"

int shutterd_accept4(int fd) {
    return accept4(fd, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int shutterd_peercred(int fd, int *pid, unsigned *uid, unsigned *gid) {
    struct ucred c;
    socklen_t len = sizeof c;
    int r = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len);
    if (r == 0) {
        *pid = c.pid;
        *uid = c.uid;
        *gid = c.gid;
    }
    return r;
}

#include <linux/input.h>
#include <sys/ioctl.h>

int shutterd_evdev_key_state(int fd, unsigned char *bits, int len) {
    return ioctl(fd, EVIOCGKEY(len), bits);
}

#include <malloc.h>

void shutterd_trim_heap(void) {
    (void)malloc_trim(0);
}

#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

struct release_state {
    long released;
    int failed;
};

static int release_main_program(struct dl_phdr_info *info, size_t size, void *data) {
    struct release_state *state = data;
    long page = sysconf(_SC_PAGESIZE);
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        /* Only segments nothing writes: their pages are the file's, never private copies. */
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W))
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        uintptr_t end = start + ph->p_memsz;
        start = (start + page - 1) & ~(uintptr_t)(page - 1);
        end &= ~(uintptr_t)(page - 1);
        if (end <= start)
            continue;
        if (madvise((void *)start, end - start, MADV_DONTNEED) == 0)
            state->released += (long)(end - start);
        else
            state->failed = 1;
    }
    return 1; /* the first object is the program itself: stop there */
}

long shutterd_release_code(void) {
    struct release_state state = {0, 0};
    dl_iterate_phdr(release_main_program, &state);
    return state.failed ? -1 : state.released;
}

const char *shutterd_errno_name(int e) {
    return strerrorname_np(e);
}

#include <sys/prctl.h>

int shutterd_name_thread(const char *name) {
    return prctl(PR_SET_NAME, name, 0, 0, 0);
}

#include <unistd.h>

int shutterd_thread_id(void) {
    return gettid();
}
