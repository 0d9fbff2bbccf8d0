/*
 * slow_sync.c: an LD_PRELOAD shim that makes storage slow for one process, for deckhand's
 * bench ("slow storage" column of P1 and rows of P2, benches/agent/slow_storage.rs).
 *
 * Why: deckhand runs on SD cards and eMMC, where one fsync costs tens of milliseconds, but the
 * bench machine's disk syncs in well under one. Instead of estimating what the syncs on a path
 * would cost there, the bench runs a real agent whose every sync really takes longer: each
 * fsync and fdatasync first sleeps DECKHAND_BENCH_SYNC_DELAY_MS milliseconds (default 20), then
 * makes the real call, so the data still reaches the disk and the agent still waits for it.
 * Those two are the only sync calls deckhand makes (Rust's File::sync_all and sync_data, in
 * src/state/fsio.rs); syncfs, sync_file_range and sync are not used and are left alone.
 *
 * Proof that it applies: when DECKHAND_BENCH_SYNC_COUNT_FILE is set, the shim keeps the number
 * of syncs it delayed in that file (a fixed-width decimal at offset 0, rewritten with pwrite
 * after each call, no sync of its own), so the bench reads how many syncs a start or an exit
 * path made through the shim.
 *
 * Built by the bench at run time: cc -shared -fPIC -O2 -o <target>/libslowsync.so slow_sync.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int (*sync_fn)(int);

static long delay_ms = 20;
static int count_fd = -1;
static unsigned long syncs_delayed;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
static sync_fn real_fsync;
static sync_fn real_fdatasync;

__attribute__((constructor)) static void slow_sync_init(void)
{
    const char *delay = getenv("DECKHAND_BENCH_SYNC_DELAY_MS");
    if (delay != NULL && *delay != '\0') {
        char *end = NULL;
        long parsed = strtol(delay, &end, 10);
        if (end != NULL && *end == '\0' && parsed >= 0)
            delay_ms = parsed;
    }
    const char *count_path = getenv("DECKHAND_BENCH_SYNC_COUNT_FILE");
    if (count_path != NULL && *count_path != '\0')
        count_fd = open(count_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    /* Resolved here, before any thread exists, so the calls below only read them. */
    real_fsync = (sync_fn)dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (sync_fn)dlsym(RTLD_NEXT, "fdatasync");
}

/* Sleeps the whole delay even when a signal interrupts the sleep. */
static void slow_sync_delay(void)
{
    struct timespec left = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
    int saved_errno = errno;
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
    errno = saved_errno;
}

/* Counts one sync; the lock keeps the file's number in step with the counter when syncs of
 * several threads finish together (a microsecond next to the delay). Fixed width, so a longer
 * number never leaves digits of an earlier one behind. */
static void slow_sync_count(void)
{
    int saved_errno = errno;
    pthread_mutex_lock(&count_lock);
    syncs_delayed += 1;
    if (count_fd >= 0) {
        char line[32];
        int length = snprintf(line, sizeof line, "%20lu\n", syncs_delayed);
        if (length > 0)
            (void)pwrite(count_fd, line, (size_t)length, 0);
    }
    pthread_mutex_unlock(&count_lock);
    errno = saved_errno;
}

static int slow_sync_call(sync_fn real, int fd)
{
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    slow_sync_delay();
    slow_sync_count();
    return real(fd);
}

int fsync(int fd)
{
    return slow_sync_call(real_fsync, fd);
}

int fdatasync(int fd)
{
    return slow_sync_call(real_fdatasync, fd);
}
