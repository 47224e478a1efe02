#define _GNU_SOURCE
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
