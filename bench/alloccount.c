/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's allocation counter: an LD_PRELOAD library that counts the calls a process
 * makes to the C heap (malloc, calloc, realloc, free and the aligned allocators, which
 * Swift's runtime uses for over-aligned objects) and passes each to the next definition
 * (glibc's), found with dlsym(RTLD_NEXT).
 *
 * Usage: ALLOCCOUNT_FILE=PATH LD_PRELOAD=alloccount.so PROGRAM ...
 * The counters live in PATH, mapped shared and updated atomically at every call, so that
 * another process reads them at any moment without signalling the counted one (whose
 * signal mask is its own business): native-endian uint64 values, in this order:
 *   magic (0x616c6c6f63636e74), allocations (malloc, calloc, aligned allocators),
 *   reallocs, frees (of non-null pointers), bytes asked for (allocations and reallocs)
 * A difference between two reads is what the process did in between. Without
 * ALLOCCOUNT_FILE it counts into its own memory, which nobody reads.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct counters {
    uint64_t magic;
    _Atomic uint64_t allocations, reallocs, frees, bytes;
};

static struct counters own;
static struct counters *counts = &own;

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);

/* dlsym may allocate (its error state) before the real allocator is known: those few
 * blocks come from here and are never freed to glibc. */
static _Alignas(max_align_t) char bootstrap[65536];
static _Atomic size_t bootstrap_used;
static _Atomic int resolving, resolved;

static void *bootstrap_alloc(size_t size)
{
    size = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    size_t at = atomic_fetch_add(&bootstrap_used, size);
    if (at + size > sizeof bootstrap)
        abort();
    return bootstrap + at; /* static storage: already zero */
}

static int from_bootstrap(const void *p)
{
    return (const char *)p >= bootstrap && (const char *)p < bootstrap + sizeof bootstrap;
}

/* Finds glibc's functions, once. While that runs, allocations (dlsym's own, and any other
 * thread's) are served from the bootstrap block. Returns whether they are known. */
static int resolve(void)
{
    if (atomic_load(&resolved))
        return 1;
    if (atomic_exchange(&resolving, 1))
        return 0;
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = dlsym(RTLD_NEXT, "memalign");
    real_free = dlsym(RTLD_NEXT, "free");
    if (!real_malloc || !real_calloc || !real_realloc || !real_free || !real_posix_memalign ||
        !real_aligned_alloc || !real_memalign)
        abort();
    atomic_store(&resolved, 1);
    return 1;
}

static void counted(size_t bytes)
{
    atomic_fetch_add_explicit(&counts->allocations, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&counts->bytes, bytes, memory_order_relaxed);
}

__attribute__((constructor)) static void start(void)
{
    resolve();
    const char *path = getenv("ALLOCCOUNT_FILE");
    if (!path || !*path)
        return;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ftruncate(fd, sizeof(struct counters)) != 0)
        abort();
    void *map = mmap(NULL, sizeof(struct counters), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        abort();
    counts = map;
    counts->magic = 0x616c6c6f63636e74ull; /* "alloccnt" */
}

void *malloc(size_t size)
{
    if (!resolve())
        return bootstrap_alloc(size);
    counted(size);
    return real_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    if (!resolve())
        return n && size > SIZE_MAX / n ? NULL : bootstrap_alloc(n * size);
    counted(n * size);
    return real_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
    if (from_bootstrap(p)) {
        void *q = malloc(size);
        size_t left = (size_t)(bootstrap + sizeof bootstrap - (char *)p);
        if (q)
            memcpy(q, p, size < left ? size : left);
        return q;
    }
    if (!resolve())
        return bootstrap_alloc(size);
    if (p)
        atomic_fetch_add_explicit(&counts->reallocs, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&counts->allocations, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&counts->bytes, size, memory_order_relaxed);
    return real_realloc(p, size);
}

void free(void *p)
{
    if (!p || from_bootstrap(p) || !resolve())
        return;
    atomic_fetch_add_explicit(&counts->frees, 1, memory_order_relaxed);
    real_free(p);
}

/* The aligned allocators are not called while the library starts (dlsym does not use
 * them): resolve() has run by then. */
int posix_memalign(void **out, size_t alignment, size_t size)
{
    resolve();
    counted(size);
    return real_posix_memalign(out, alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size)
{
    resolve();
    counted(size);
    return real_aligned_alloc(alignment, size);
}

void *memalign(size_t alignment, size_t size)
{
    resolve();
    counted(size);
    return real_memalign(alignment, size);
}
