/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's clients: the floor (a direct evdev reader) or K clients of a daemon's
 * Unix socket, all in one process around one epoll, each stamping CLOCK_MONOTONIC when a
 * read returns.
 *
 * Usage:
 *   reader --evdev NODE [common options]          the floor: EV_KEY value 1 is a press,
 *                                                 REL_DIAL values are summed
 *   reader --unix PATH [--clients K] [--hello] [--send LINE] [common options]
 *     --hello       wait for a first line (shutterd's hello) on every client before ready
 *     --send LINE   send LINE and a newline on every client (after the hello) and wait for
 *                   a line containing "reply" before ready
 *   common options:
 *     --match STR   a line containing STR is a press (latency mode)
 *     --dial        dial mode: sum "delta", check "clientSeq" of slider lines, count
 *                   "overflow" (or REL_DIAL values and SYN_DROPPED for --evdev)
 *     --expect N    stop once every client has N presses (latency) or a summed delta of N
 *     --idle-ms MS  stop MS after the last data once anything matched (default 3000)
 *     --timeout S   stop after S seconds whatever happens (default 120)
 *     --show K      copy the first K lines of the first client to stderr
 *     --hold        once done, print "done" and keep every connection open until stdin
 *                   ends: what a daemon does when its clients leave stays out of a
 *                   measurement taken meanwhile
 *     --out FILE    latency: per client a uint32 count and that many uint64 receipt times
 *                   (ns); dial: one text line per client
 * Prints "ready" on stdout once connected (and greeted), then a summary line when done.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/input.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define BUFSZ 65536

struct client {
    int fd;
    char *buf;      /* partial line carried over between reads */
    size_t have;
    uint64_t *times;
    uint32_t n;
    uint64_t lines;
    /* lines after the greeting that are not a reply, and their bytes with the newline */
    uint64_t event_lines, event_bytes;
    /* dial mode */
    long long sum;
    uint64_t sliders, seq_gaps, overflows, dropped;
    long long last_seq;
    uint64_t first_ns, last_ns;
    int greeted, replied;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "reader: %s: %s\n", what, strerror(errno));
    exit(1);
}

static const char *match;
static int dial;
static unsigned long expect;
static struct client *clients;
static int nclients;
static long show;

static long long field(const char *line, size_t len, const char *name, int *found)
{
    const char *p = memmem(line, len, name, strlen(name));
    *found = p != NULL;
    return p ? strtoll(p + strlen(name), NULL, 10) : 0;
}

static void on_line(struct client *c, const char *line, size_t len, uint64_t t)
{
    c->lines++;
    if (c == clients && show > 0) {
        show--;
        fprintf(stderr, "reader: %.*s\n", (int)len, line);
    }
    if (!c->greeted) {
        c->greeted = 1;
        return;
    }
    if (!c->replied && memmem(line, len, "\"reply\"", 7)) {
        c->replied = 1;
        return;
    }
    c->event_lines++;
    c->event_bytes += len + 1;
    if (dial) {
        if (memmem(line, len, "\"overflow\"", 10)) {
            c->overflows++;
            return;
        }
        if (!memmem(line, len, "\"slider\"", 8))
            return;
        int f1, f2;
        long long delta = field(line, len, "\"delta\":", &f1);
        long long seq = field(line, len, "\"clientSeq\":", &f2);
        if (c->last_seq && seq != c->last_seq + 1)
            c->seq_gaps++;
        c->last_seq = seq;
        c->sum += delta;
        c->sliders++;
        if (!c->first_ns)
            c->first_ns = t;
        c->last_ns = t;
    } else if (match && memmem(line, len, match, strlen(match))) {
        if (c->n < expect)
            c->times[c->n++] = t;
    }
}

static int client_done(const struct client *c)
{
    return dial ? c->sum >= (long long)expect : c->n >= expect;
}

/* Reads what is there; returns 0 on end of file. */
static int on_readable(struct client *c, int evdev)
{
    static char raw[BUFSZ];
    ssize_t got = read(c->fd, evdev ? raw : c->buf + c->have, evdev ? sizeof raw : BUFSZ - c->have);
    uint64_t t = now_ns();
    if (got < 0)
        return errno == EAGAIN || errno == EINTR ? 1 : 0;
    if (got == 0)
        return 0;
    if (evdev) {
        const struct input_event *ev = (const struct input_event *)raw;
        for (size_t i = 0; i < (size_t)got / sizeof *ev; i++) {
            if (ev[i].type == EV_KEY && ev[i].value == 1 && !dial) {
                if (c->n < expect)
                    c->times[c->n++] = t;
            } else if (ev[i].type == EV_REL && ev[i].code == REL_DIAL && dial) {
                c->sum += ev[i].value;
                c->sliders++;
                if (!c->first_ns)
                    c->first_ns = t;
                c->last_ns = t;
            } else if (ev[i].type == EV_SYN && ev[i].code == SYN_DROPPED) {
                c->dropped++;
            }
        }
        return 1;
    }
    c->have += (size_t)got;
    char *start = c->buf, *end = c->buf + c->have, *nl;
    while ((nl = memchr(start, '\n', (size_t)(end - start)))) {
        on_line(c, start, (size_t)(nl - start), t);
        start = nl + 1;
    }
    c->have = (size_t)(end - start);
    if (c->have == BUFSZ) /* a line longer than the buffer: drop it */
        c->have = 0;
    memmove(c->buf, start, c->have);
    return 1;
}

int main(int argc, char **argv)
{
    const char *node = NULL, *path = NULL, *out = NULL, *send_line = NULL;
    int hello = 0, hold = 0;
    long idle_ms = 3000, timeout_s = 120;
    nclients = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--evdev") && v) node = argv[++i];
        else if (!strcmp(a, "--unix") && v) path = argv[++i];
        else if (!strcmp(a, "--clients") && v) nclients = atoi(argv[++i]);
        else if (!strcmp(a, "--hello")) hello = 1;
        else if (!strcmp(a, "--send") && v) send_line = argv[++i];
        else if (!strcmp(a, "--match") && v) match = argv[++i];
        else if (!strcmp(a, "--dial")) dial = 1;
        else if (!strcmp(a, "--expect") && v) expect = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(a, "--idle-ms") && v) idle_ms = atol(argv[++i]);
        else if (!strcmp(a, "--timeout") && v) timeout_s = atol(argv[++i]);
        else if (!strcmp(a, "--out") && v) out = argv[++i];
        else if (!strcmp(a, "--show") && v) show = atol(argv[++i]);
        else if (!strcmp(a, "--hold")) hold = 1;
        else {
            fprintf(stderr, "reader: bad argument '%s' (see the comment at the top of reader.c)\n", a);
            return 64;
        }
    }
    if (!node == !path || nclients < 1 || (node && nclients != 1)) {
        fprintf(stderr, "reader: give --evdev NODE or --unix PATH [--clients K]\n");
        return 64;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    clients = calloc((size_t)nclients, sizeof *clients);
    for (int i = 0; i < nclients; i++) {
        struct client *c = &clients[i];
        c->times = calloc(expect ? expect : 1, sizeof *c->times);
        c->buf = malloc(BUFSZ);
        c->greeted = !hello;
        c->replied = !send_line;
        if (node) {
            c->fd = open(node, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
            if (c->fd < 0)
                die(node);
            int clk = CLOCK_MONOTONIC;
            ioctl(c->fd, EVIOCSCLOCKID, &clk);
        } else {
            c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            struct sockaddr_un sa = {.sun_family = AF_UNIX};
            snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
            if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0)
                die(path);
            fcntl(c->fd, F_SETFL, O_NONBLOCK);
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
            die("epoll_ctl");
    }

    struct epoll_event evs[256];
    uint64_t deadline = now_ns() + (uint64_t)timeout_s * 1000000000u;
    int ready = 0, sent = 0, open_clients = nclients;
    uint64_t last_data = 0;
    for (;;) {
        if (!ready) {
            int all_greeted = 1, all_replied = 1;
            for (int i = 0; i < nclients; i++) {
                all_greeted &= clients[i].greeted;
                all_replied &= clients[i].replied;
            }
            if (all_greeted && send_line && !sent) {
                for (int i = 0; i < nclients; i++) {
                    dprintf(clients[i].fd, "%s\n", send_line);
                }
                sent = 1;
            }
            if (all_greeted && all_replied) {
                ready = 1;
                printf("ready\n");
                fflush(stdout);
            }
        }
        int done = 1;
        for (int i = 0; i < nclients && done; i++)
            done = client_done(&clients[i]) || clients[i].fd < 0;
        uint64_t t = now_ns();
        if (ready && expect && done)
            break;
        if (t >= deadline || open_clients == 0)
            break;
        if (last_data && t >= last_data + (uint64_t)idle_ms * 1000000u)
            break;
        int n = epoll_wait(ep, evs, 256, 100);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        for (int k = 0; k < n; k++) {
            struct client *c = &clients[evs[k].data.u32];
            uint32_t before = c->n;
            uint64_t sliders = c->sliders;
            if (!on_readable(c, node != NULL)) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                c->fd = -1;
                open_clients--;
                continue;
            }
            if (c->n != before || c->sliders != sliders)
                last_data = now_ns();
        }
    }
    if (hold) {
        printf("done\n");
        fflush(stdout);
        char b[64];
        ssize_t got;
        while ((got = read(0, b, sizeof b)) > 0 || (got < 0 && errno == EINTR)) {
        }
    }

    uint64_t total = 0, lines = 0, event_lines = 0, event_bytes = 0;
    long long min_sum = -1;
    uint64_t gaps = 0, overflows = 0, dropped = 0, closed = 0;
    for (int i = 0; i < nclients; i++) {
        struct client *c = &clients[i];
        total += dial ? c->sliders : c->n;
        lines += c->lines;
        event_lines += c->event_lines;
        event_bytes += c->event_bytes;
        gaps += c->seq_gaps;
        overflows += c->overflows;
        dropped += c->dropped;
        closed += c->fd < 0;
        if (min_sum < 0 || c->sum < min_sum)
            min_sum = c->sum;
    }
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f)
            die(out);
        for (int i = 0; i < nclients; i++) {
            struct client *c = &clients[i];
            if (dial) {
                fprintf(f, "client=%d sum=%lld sliders=%llu gaps=%llu overflows=%llu dropped=%llu "
                           "first_ns=%llu last_ns=%llu closed=%d\n",
                        i, c->sum, (unsigned long long)c->sliders, (unsigned long long)c->seq_gaps,
                        (unsigned long long)c->overflows, (unsigned long long)c->dropped,
                        (unsigned long long)c->first_ns, (unsigned long long)c->last_ns, c->fd < 0);
            } else {
                fwrite(&c->n, sizeof c->n, 1, f);
                fwrite(c->times, sizeof *c->times, c->n, f);
            }
        }
        if (fclose(f) != 0)
            die(out);
    }
    printf("summary clients=%d matched=%llu lines=%llu min_sum=%lld gaps=%llu overflows=%llu "
           "dropped=%llu closed=%llu event_lines=%llu event_bytes=%llu\n",
           nclients, (unsigned long long)total, (unsigned long long)lines, min_sum,
           (unsigned long long)gaps, (unsigned long long)overflows, (unsigned long long)dropped,
           (unsigned long long)closed, (unsigned long long)event_lines, (unsigned long long)event_bytes);
    return 0;
}
