/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's injector: makes uinput devices and writes events into them, recording
 * CLOCK_MONOTONIC just before each write.
 *
 * Usage: inject
 * On start it creates a key device ("shutterd-bench keys": KEY_VOLUMEUP, KEY_VOLUMEDOWN,
 * KEY_PLAYPAUSE) and a dial ("shutterd-bench dial": REL_DIAL, BTN_0), prints
 *   keys /dev/input/eventN
 *   dial /dev/input/eventM
 *   ready
 * and then reads commands, one a line, on stdin:
 *   keys N GAP_US FILE  N presses of KEY_VOLUMEUP: each press is one write (key down +
 *                       SYN_REPORT), its release another write GAP_US/2 later, the next press
 *                       GAP_US after the first. FILE gets N native uint64 CLOCK_MONOTONIC
 *                       nanoseconds, each taken just before a press's write.
 *   dial N              N frames (REL_DIAL +1, SYN_REPORT), one write each, unpaced.
 *   extra K             K more key devices, left idle.
 *   quit                destroy everything and exit (so does end of input).
 * Every command is answered by one line, "done ELAPSED_NS" or "error ...".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/uinput.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "inject: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void xioctl(int fd, unsigned long req, long arg, const char *what)
{
    if (ioctl(fd, req, arg) < 0)
        die(what);
}

/* Creates a device; returns its uinput fd and writes its /dev/input/eventN into node. */
static int make_device(const char *name, uint16_t product, const int *keys, int nkeys, int dial,
                       char *node, size_t nodelen)
{
    int fd = open("/dev/uinput", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        die("open /dev/uinput");
    xioctl(fd, UI_SET_EVBIT, EV_KEY, "UI_SET_EVBIT EV_KEY");
    for (int i = 0; i < nkeys; i++)
        xioctl(fd, UI_SET_KEYBIT, keys[i], "UI_SET_KEYBIT");
    if (dial) {
        xioctl(fd, UI_SET_EVBIT, EV_REL, "UI_SET_EVBIT EV_REL");
        xioctl(fd, UI_SET_RELBIT, REL_DIAL, "UI_SET_RELBIT REL_DIAL");
    }
    struct uinput_setup setup;
    memset(&setup, 0, sizeof setup);
    setup.id.bustype = BUS_VIRTUAL;
    setup.id.vendor = 0x1209; /* pid.codes' test vendor id */
    setup.id.product = product;
    setup.id.version = 1;
    snprintf(setup.name, sizeof setup.name, "%s", name);
    xioctl(fd, UI_DEV_SETUP, (long)&setup, "UI_DEV_SETUP");
    xioctl(fd, UI_DEV_CREATE, 0, "UI_DEV_CREATE");

    char sysname[64] = "";
    if (ioctl(fd, UI_GET_SYSNAME(sizeof sysname), sysname) < 0)
        die("UI_GET_SYSNAME");
    char dir[128];
    snprintf(dir, sizeof dir, "/sys/devices/virtual/input/%s", sysname);
    node[0] = 0;
    for (int tries = 0; tries < 500 && !node[0]; tries++) {
        DIR *d = opendir(dir);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)))
                if (strncmp(e->d_name, "event", 5) == 0)
                    snprintf(node, nodelen, "/dev/input/%s", e->d_name);
            closedir(d);
        }
        if (!node[0])
            usleep(10000);
    }
    if (!node[0]) {
        errno = ENOENT;
        die("no event node for the new device");
    }
    return fd;
}

static void emit(int fd, const struct input_event *ev, size_t n)
{
    ssize_t want = (ssize_t)(n * sizeof *ev);
    ssize_t got = write(fd, ev, (size_t)want);
    if (got != want)
        die("write to uinput");
}

static void set_event(struct input_event *ev, int type, int code, int value)
{
    memset(ev, 0, sizeof *ev);
    ev->type = (uint16_t)type;
    ev->code = (uint16_t)code;
    ev->value = value;
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

int main(void)
{
    static const int keys[] = {KEY_VOLUMEUP, KEY_VOLUMEDOWN, KEY_PLAYPAUSE};
    static const int dial_keys[] = {BTN_0};
    char node[300];
    int kfd = make_device("shutterd-bench keys", 0x0001, keys, 3, 0, node, sizeof node);
    printf("keys %s\n", node);
    int dfd = make_device("shutterd-bench dial", 0x0002, dial_keys, 1, 1, node, sizeof node);
    printf("dial %s\n", node);
    printf("ready\n");
    fflush(stdout);

    int extras = 0;
    char line[512];
    while (fgets(line, sizeof line, stdin)) {
        unsigned long n = 0, gap = 0;
        char file[400];
        if (sscanf(line, "keys %lu %lu %399s", &n, &gap, file) == 3) {
            uint64_t *times = calloc(n ? n : 1, sizeof *times);
            struct input_event down[2], up[2];
            set_event(&down[0], EV_KEY, KEY_VOLUMEUP, 1);
            set_event(&down[1], EV_SYN, SYN_REPORT, 0);
            set_event(&up[0], EV_KEY, KEY_VOLUMEUP, 0);
            set_event(&up[1], EV_SYN, SYN_REPORT, 0);
            uint64_t start = now_ns(), next = start;
            for (unsigned long i = 0; i < n; i++) {
                sleep_until(next);
                times[i] = now_ns();
                emit(kfd, down, 2);
                sleep_until(next + gap * 500u);
                emit(kfd, up, 2);
                next += gap * 1000u;
                /* A press that came late (the injector was descheduled) is not followed
                 * by a burst of catching up: presses stay at least half a gap apart. */
                uint64_t t = now_ns();
                if (next < t + gap * 500u)
                    next = t + gap * 500u;
            }
            uint64_t took = now_ns() - start;
            FILE *f = fopen(file, "wb");
            if (!f || fwrite(times, sizeof *times, n, f) != n || fclose(f) != 0) {
                printf("error writing %s: %s\n", file, strerror(errno));
            } else {
                printf("done %llu\n", (unsigned long long)took);
            }
            free(times);
        } else if (sscanf(line, "dial %lu", &n) == 1) {
            struct input_event step[2];
            set_event(&step[0], EV_REL, REL_DIAL, 1);
            set_event(&step[1], EV_SYN, SYN_REPORT, 0);
            uint64_t start = now_ns();
            for (unsigned long i = 0; i < n; i++)
                emit(dfd, step, 2);
            printf("done %llu\n", (unsigned long long)(now_ns() - start));
        } else if (sscanf(line, "extra %lu", &n) == 1) {
            uint64_t start = now_ns();
            for (unsigned long i = 0; i < n; i++) {
                char name[64];
                snprintf(name, sizeof name, "shutterd-bench extra %d", ++extras);
                make_device(name, (uint16_t)(0x0100 + extras), keys, 3, 0, node, sizeof node);
            }
            printf("done %llu\n", (unsigned long long)(now_ns() - start));
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        } else {
            printf("error unknown command: %s", line);
        }
        fflush(stdout);
    }
    /* Closing /dev/uinput destroys the devices. */
    return 0;
}
