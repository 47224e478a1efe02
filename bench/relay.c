/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's reference relay: the least a daemon that publishes key presses on a Unix
 * socket has to do, written the way the C daemons shutterd replaces are. One epoll; one read
 * of the evdev node per wake-up into an input_event buffer (a frame, up to its SYN_REPORT,
 * arrives in one read); for each key-down one short text line, written to every connected
 * client. No parsing of what clients send, no per-client state beyond the descriptor.
 *
 * Usage: relay NODE SOCKET [BYTES]
 *   NODE    an evdev node (/dev/input/eventN)
 *   SOCKET  the path of the Unix stream socket to listen on (replaced if it exists)
 *   BYTES   the wire relay: a line for the key-up too, each padded to BYTES bytes (shutterd's
 *           event lines' mean length), so that it writes as many messages and bytes as
 *           shutterd does and nothing else: what the protocol's volume alone costs
 * Prints "ready" on stdout once it listens. A line is "key CODE down SEC.USEC" (or "up"), the
 * kernel's time of the event. A client whose socket is full or gone is dropped. Runs until
 * killed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/input.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CLIENTS 1024

static int clients[MAX_CLIENTS];
static int nclients;
/* The wire relay's line length (0: the short line, key-downs only). */
static size_t wire_bytes;

static void die(const char *what)
{
    fprintf(stderr, "relay: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void drop(int ep, int i)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, clients[i], NULL);
    close(clients[i]);
    clients[i] = clients[--nclients];
}

static void publish(int ep, const struct input_event *ev)
{
    char line[4096];
    int len = snprintf(line, 64, "key %u %s %ld.%06ld\n", ev->code, ev->value ? "down" : "up",
                       (long)ev->input_event_sec, (long)ev->input_event_usec);
    if (wire_bytes > (size_t)len) {
        memset(line + len - 1, 'x', wire_bytes - (size_t)len);
        line[wire_bytes - 1] = '\n';
        len = (int)wire_bytes;
    }
    for (int i = 0; i < nclients;) {
        if (send(clients[i], line, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) == len)
            i++;
        else
            drop(ep, i);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: relay NODE SOCKET [BYTES]\n");
        return 64;
    }
    if (argc == 4) {
        char *end;
        unsigned long b = strtoul(argv[3], &end, 10);
        if (*end || b < 64 || b > 4096) {
            fprintf(stderr, "relay: BYTES must be a number from 64 to 4096, not '%s'\n", argv[3]);
            return 64;
        }
        wire_bytes = b;
    }
    int evdev = open(argv[1], O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (evdev < 0)
        die(argv[1]);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listener < 0)
        die("socket");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(argv[2]) >= sizeof sa.sun_path) {
        fprintf(stderr, "relay: socket path too long: %s\n", argv[2]);
        return 64;
    }
    strcpy(sa.sun_path, argv[2]);
    unlink(argv[2]);
    if (bind(listener, (struct sockaddr *)&sa, sizeof sa) < 0)
        die(argv[2]);
    if (listen(listener, 128) < 0)
        die("listen");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = evdev};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, evdev, &ev) < 0)
        die("epoll_ctl evdev");
    ev.data.fd = listener;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) < 0)
        die("epoll_ctl listener");
    printf("ready\n");
    fflush(stdout);

    struct input_event buf[64];
    struct epoll_event ready[16];
    for (;;) {
        int n = epoll_wait(ep, ready, 16, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int k = 0; k < n; k++) {
            int fd = ready[k].data.fd;
            if (fd == evdev) {
                ssize_t got = read(evdev, buf, sizeof buf);
                if (got < 0) {
                    if (errno == EAGAIN || errno == EINTR)
                        continue;
                    die("read evdev");
                }
                for (size_t i = 0; i < (size_t)got / sizeof *buf; i++)
                    if (buf[i].type == EV_KEY && (buf[i].value == 1 || (wire_bytes && buf[i].value == 0)))
                        publish(ep, &buf[i]);
            } else if (fd == listener) {
                int c = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c < 0)
                    continue;
                if (nclients == MAX_CLIENTS) {
                    close(c);
                    continue;
                }
                /* Only hang-ups matter: what a client sends is never read. */
                struct epoll_event cev = {.events = EPOLLRDHUP, .data.fd = c};
                if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) < 0) {
                    close(c);
                    continue;
                }
                clients[nclients++] = c;
            } else {
                for (int i = 0; i < nclients; i++)
                    if (clients[i] == fd) {
                        drop(ep, i);
                        break;
                    }
            }
        }
    }
}
