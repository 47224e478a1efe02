/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's MQTT consumer: subscribes to a topic filter on a broker (QoS 1) through
 * libmosquitto and stamps CLOCK_MONOTONIC when each message is handed over, as reader.c
 * does for a socket client.
 *
 * Usage:
 *   mqttsub --port P --topic FILTER [--match STR] [--expect N] [--idle-ms MS]
 *           [--timeout S] [--out FILE]
 *     --match STR   a message whose payload contains STR is counted (default: every one)
 *     --expect N    stop after N counted messages
 *     --idle-ms MS  stop MS after the last counted message once one came (default 3000)
 *     --timeout S   stop after S seconds whatever happens (default 120)
 *     --out FILE    a uint32 count and that many uint64 receipt times (ns), reader.c's
 *                   format for one client
 * Prints "ready" on stdout once subscribed, then a summary line when done:
 *   summary clients=1 matched=N messages=M first_ns=A last_ns=B
 */
#define _GNU_SOURCE
#include <mosquitto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *match;
static uint64_t expect = UINT64_MAX, messages, matched, first_ns, last_ns;
static uint64_t *times;
static size_t cap;
static int subscribed;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_message(struct mosquitto *m, void *arg, const struct mosquitto_message *msg)
{
    (void)m;
    (void)arg;
    uint64_t t = now_ns();
    messages++;
    if (match && (msg->payloadlen <= 0 || !memmem(msg->payload, (size_t)msg->payloadlen, match, strlen(match))))
        return;
    if (matched == cap) {
        cap = cap ? cap * 2 : 4096;
        times = realloc(times, cap * sizeof *times);
        if (!times) {
            perror("mqttsub: realloc");
            exit(1);
        }
    }
    times[matched++] = t;
    if (!first_ns)
        first_ns = t;
    last_ns = t;
}

static void on_subscribe(struct mosquitto *m, void *arg, int mid, int n, const int *qos)
{
    (void)m;
    (void)arg;
    (void)mid;
    (void)n;
    (void)qos;
    subscribed = 1;
}

int main(int argc, char **argv)
{
    const char *topic = NULL, *out = NULL;
    int port = 0;
    long idle_ms = 3000, timeout_s = 120;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "mqttsub: %s needs a value\n", a);
            return 64;
        }
        if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--topic")) topic = v;
        else if (!strcmp(a, "--match")) match = v;
        else if (!strcmp(a, "--expect")) expect = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--idle-ms")) idle_ms = atol(v);
        else if (!strcmp(a, "--timeout")) timeout_s = atol(v);
        else if (!strcmp(a, "--out")) out = v;
        else {
            fprintf(stderr, "mqttsub: unknown option %s\n", a);
            return 64;
        }
        i++;
    }
    if (!port || !topic) {
        fprintf(stderr, "mqttsub: --port and --topic are needed\n");
        return 64;
    }
    mosquitto_lib_init();
    struct mosquitto *m = mosquitto_new(NULL, 1, NULL);
    if (!m) {
        perror("mqttsub: mosquitto_new");
        return 1;
    }
    mosquitto_message_callback_set(m, on_message);
    mosquitto_subscribe_callback_set(m, on_subscribe);
    int rc = mosquitto_connect(m, "127.0.0.1", port, 60);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "mqttsub: connect: %s\n", mosquitto_strerror(rc));
        return 1;
    }
    mosquitto_subscribe(m, NULL, topic, 1);
    uint64_t start = now_ns();
    int said_ready = 0;
    for (;;) {
        rc = mosquitto_loop(m, 20, 1);
        if (rc != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "mqttsub: %s\n", mosquitto_strerror(rc));
            break;
        }
        if (subscribed && !said_ready) {
            printf("ready\n");
            fflush(stdout);
            said_ready = 1;
        }
        uint64_t t = now_ns();
        if (matched >= expect) break;
        if (matched && t - last_ns > (uint64_t)idle_ms * 1000000u) break;
        if (t - start > (uint64_t)timeout_s * 1000000000u) break;
    }
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f) {
            perror(out);
            return 1;
        }
        uint32_t n = (uint32_t)matched;
        fwrite(&n, sizeof n, 1, f);
        fwrite(times, sizeof *times, n, f);
        fclose(f);
    }
    printf("summary clients=1 matched=%llu messages=%llu first_ns=%llu last_ns=%llu\n",
           (unsigned long long)matched, (unsigned long long)messages, (unsigned long long)first_ns,
           (unsigned long long)last_ns);
    fflush(stdout);
    mosquitto_destroy(m);
    mosquitto_lib_cleanup();
    return 0;
}
