/*
 * Preloaded into a store's server process (LD_PRELOAD), shifts its wall
 * clock by the milliseconds written in the file $CLOCK_SHIFT_FILE, so that
 * a test can step the clock forward or back while the server runs, as an
 * NTP step or a bad clock would.
 * Monotonic clocks are left alone.
 *
 * Debian's libfaketime would do this, but it cannot start inside Debian's
 * redis-server: jemalloc reads the clock while libfaketime initialises
 * (libfaketime issue #130). This shim calls the kernel directly, so it
 * needs no initialisation.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Read at every call (a few microseconds): a step is seen by the next
 * clock read after the file is renamed into place. */
static long long current_shift_ms(void) {
    long long shift_ms = 0;
    const char *path = getenv("CLOCK_SHIFT_FILE");
    int fd = path ? open(path, O_RDONLY) : -1;
    if (fd >= 0) {
        char text[32] = {0};
        if (read(fd, text, sizeof text - 1) > 0) shift_ms = strtoll(text, NULL, 10);
        close(fd);
    }
    return shift_ms;
}

static void shift(struct timespec *ts) {
    long long by = current_shift_ms();
    long long ns = ts->tv_nsec + (by % 1000) * 1000000LL;
    ts->tv_sec += by / 1000 + ns / 1000000000LL;
    ns %= 1000000000LL;
    if (ns < 0) {
        ns += 1000000000LL;
        ts->tv_sec -= 1;
    }
    ts->tv_nsec = ns;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int result = (int)syscall(SYS_clock_gettime, clock, ts);
    if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) shift(ts);
    return result;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    int result = clock_gettime(CLOCK_REALTIME, &ts);
    if (result == 0 && tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return result;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
