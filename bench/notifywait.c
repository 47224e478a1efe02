/* SPDX-License-Identifier: Apache-2.0 */
/* Start-up time: exec to READY=1.
 *
 * Usage: notifywait SOCKET TIMEOUT_S LOG PROGRAM [ARGS...]
 * Binds a datagram socket at SOCKET, starts PROGRAM (searched in PATH) with NOTIFY_SOCKET=SOCKET, its stdout
 * and stderr appended to LOG and its stdin /dev/null, and prints
 * "ready NS PID" (nanoseconds from just before the spawn to the READY=1 datagram) and exits,
 * leaving PROGRAM running; "timeout PID" after TIMEOUT_S seconds without READY=1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: notifywait SOCKET TIMEOUT_S LOG PROGRAM [ARGS...]\n");
        return 64;
    }
    const char *path = argv[1];
    int timeout_ms = atoi(argv[2]) * 1000;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    unlink(path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        fprintf(stderr, "notifywait: %s: %s\n", path, strerror(errno));
        return 1;
    }
    setenv("NOTIFY_SOCKET", path, 1);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, argv[3], O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    uint64_t start = now_ns();
    int err = posix_spawnp(&pid, argv[4], &fa, NULL, argv + 4, environ);
    if (err) {
        fprintf(stderr, "notifywait: %s: %s\n", argv[4], strerror(err));
        return 1;
    }
    for (;;) {
        uint64_t waited = (now_ns() - start) / 1000000u;
        if ((int)waited >= timeout_ms)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms - (int)waited) <= 0)
            continue;
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
        uint64_t t = now_ns();
        if (n <= 0)
            continue;
        buf[n] = 0;
        if (!strncmp(buf, "READY=1", 7) || strstr(buf, "\nREADY=1")) {
            printf("ready %llu %d\n", (unsigned long long)(t - start), (int)pid);
            unlink(path);
            return 0;
        }
    }
    printf("timeout %d\n", (int)pid);
    unlink(path);
    return 2;
}
