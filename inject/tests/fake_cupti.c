/* A stand-in for libcupti, for the CPU tests of the injected recorder (its tests folder): the
 * CUPTI entry points the recorder calls, with records made up at the offsets cupti_activity.h
 * gives (CUDA 13.0). SYNCHRONIZATION cannot be enabled here.
 *
 * Without a script, every flush hands over one buffer of the same records; the first brings
 * the device, context and stream records too, and CUPTI's own dropped count (2); a forced flush
 * adds a kernel still running (no end). The clock is CLOCK_MONOTONIC.
 *
 * With FAKE_CUPTI_SCRIPT naming a file, the test says what each flush hands over, and the
 * clock is the script's. One command a line (times in ns; `#` starts a comment):
 *   start NS                     the clock until recording is turned on (the recorder's
 *                                start time)
 *   flush NS                     the next flush's records follow; the clock reads NS from
 *                                when recording is turned on (the first) or the flush before
 *                                ends, so the recorder reads NS just before asking for them;
 *                                after the last one each flush moves the clock 1 ms on
 *   marker start|end|instant ID THREAD TIME [NAME [DOMAIN]]
 *   api CBID THREAD START END CORRELATION          a driver call
 *   kernel CORRELATION START END
 *   copy CORRELATION START END
 *   sync CORRELATION START END                     a stream synchronization */
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*request_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*complete_fn)(void *context, uint32_t stream, uint8_t *buffer, size_t size, size_t valid);

static request_fn requested;
static complete_fn completed;
static int flushes;
static int dropped_said;

enum { OK = 0, FAKE_ERROR = 999, NO_MORE = 3 };

int cuptiGetVersion(uint32_t *version) { *version = 130001; return OK; }

int cuptiGetResultString(int result, const char **text) {
    (void)result;
    *text = "CUPTI_ERROR_FAKE";
    return OK;
}

/* The script, once read: its records, each in the flush (from 1) that hands it over. */
enum { MAX_STEPS = 4096, MAX_FLUSHES = 256 };
struct step {
    int flush;
    char what[8];
    char phase[8];
    uint64_t a, b, c, d, e;
    const char *name, *domain;
};
static struct step steps[MAX_STEPS];
static int step_count;
static uint64_t flush_times[MAX_FLUSHES + 1];
static int flush_count;
static int scripted = -1; /* -1: not looked for yet */
static uint64_t script_clock;

static const char *kept_text(const char *text) {
    return (text && *text && strcmp(text, "-") != 0) ? strdup(text) : 0;
}

static void read_script(void) {
    const char *path = getenv("FAKE_CUPTI_SCRIPT");
    FILE *file = path && *path ? fopen(path, "r") : 0;
    scripted = file != 0;
    if (!file) return;
    char line[512];
    while (fgets(line, sizeof line, file)) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char what[16] = {0}, phase[16] = {0}, name[128] = {0}, domain[128] = {0};
        unsigned long long v[5] = {0};
        if (sscanf(line, "%15s", what) != 1) continue;
        if (strcmp(what, "start") == 0) {
            sscanf(line, "%*s %llu", &v[0]);
            script_clock = v[0];
        } else if (strcmp(what, "flush") == 0) {
            sscanf(line, "%*s %llu", &v[0]);
            if (flush_count < MAX_FLUSHES) flush_times[++flush_count] = v[0];
        } else if (step_count < MAX_STEPS) {
            struct step *s = &steps[step_count++];
            s->flush = flush_count;
            strncpy(s->what, what, sizeof s->what - 1);
            if (strcmp(what, "marker") == 0) {
                sscanf(line, "%*s %15s %llu %llu %llu %127s %127s", phase, &v[0], &v[1], &v[2], name, domain);
                strncpy(s->phase, phase, sizeof s->phase - 1);
                s->name = kept_text(name);
                s->domain = kept_text(domain);
            } else {
                sscanf(line, "%*s %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4]);
            }
            s->a = v[0]; s->b = v[1]; s->c = v[2]; s->d = v[3]; s->e = v[4];
        }
    }
    fclose(file);
}

int cuptiGetTimestamp(uint64_t *ns) {
    if (scripted < 0) read_script();
    if (scripted) {
        *ns = script_clock;
        return OK;
    }
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    *ns = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
    return OK;
}

int cuptiActivityEnable(int kind) { return kind == 38 ? FAKE_ERROR : OK; }
int cuptiActivityDisable(int kind) { (void)kind; return OK; }
int cuptiActivityEnableDriverApi(uint32_t cbid, uint8_t on) { (void)cbid; (void)on; return OK; }
int cuptiActivityEnableRuntimeApi(uint32_t cbid, uint8_t on) { (void)cbid; (void)on; return OK; }
int cuptiSubscribe(void **subscriber, void *callback, void *data) {
    (void)subscriber; (void)callback; (void)data;
    return OK;
}
int cuptiEnableCallback(uint32_t on, void *subscriber, int domain, uint32_t cbid) {
    (void)on; (void)subscriber; (void)domain; (void)cbid;
    return OK;
}

int cuptiActivityRegisterCallbacks(request_fn request, complete_fn complete) {
    requested = request;
    completed = complete;
    if (scripted < 0) read_script();
    if (scripted && flush_count > 0) script_clock = flush_times[1];
    return OK;
}

int cuptiActivityGetNumDroppedRecords(void *context, uint32_t stream, size_t *dropped) {
    (void)context; (void)stream;
    *dropped = dropped_said || scripted == 1 ? 0 : 2;
    dropped_said = 1;
    return OK;
}

/* Driver 2, 27 and 307, 5 (not kept by the recorder); runtime 131. */
int cuptiGetCallbackName(int domain, uint32_t cbid, const char **name) {
    *name = 0;
    if (domain == 1 && cbid == 2) *name = "cuDriverGetVersion";
    if (domain == 1 && cbid == 5) *name = "cuDeviceGet";
    if (domain == 1 && cbid == 27) *name = "cuMemAlloc_v2";
    if (domain == 1 && cbid == 307) *name = "cuLaunchKernel";
    if (domain == 2 && cbid == 131) *name = "cudaStreamSynchronize_v3020";
    return *name ? OK : 1;
}

/* Each record's size by kind, as this fake writes them. */
static size_t record_size(uint32_t kind) {
    switch (kind) {
    case 10: return 256; /* CONCURRENT_KERNEL */
    case 1: return 88;   /* MEMCPY */
    case 4: return 40;   /* DRIVER */
    case 12: return 56;  /* MARKER */
    case 8: return 184;  /* DEVICE */
    case 38: return 40;  /* SYNCHRONIZATION */
    case 9: return 32;   /* CONTEXT */
    case 37: return 24;  /* STREAM */
    default: return 40;  /* OVERHEAD (17), not read by the recorder */
    }
}

int cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **record) {
    uint8_t *next = *record ? (uint8_t *)*record + record_size(*(uint32_t *)*record) : buffer;
    if (next >= buffer + valid) return NO_MORE;
    *record = next;
    return OK;
}

static uint8_t *at;
static void put32(size_t offset, uint32_t v) { memcpy(at + offset, &v, 4); }
static void put64(size_t offset, uint64_t v) { memcpy(at + offset, &v, 8); }
static void begin(uint32_t kind) { memset(at, 0, record_size(kind)); put32(0, kind); }
static void end(void) { at += record_size(*(uint32_t *)at); }

static void kernel_of(uint32_t correlation, uint64_t start, uint64_t stop) {
    begin(10);
    put64(16, start); put64(24, stop);
    put32(40, 0); put32(44, 1); put32(48, 7); /* device, context, stream */
    put32(52, 64); put32(56, 1); put32(60, 1); put32(64, 256); put32(68, 1); put32(72, 1);
    put32(92, correlation);
    put64(104, (uint64_t)(uintptr_t)"fake_kernel");
    end();
}
static void kernel(uint64_t start, uint64_t stop) { kernel_of(11, start, stop); }

/* A pageable host-to-device copy of 4 MiB on stream 13. */
static void copy_of(uint32_t correlation, uint64_t start, uint64_t stop) {
    begin(1); at[4] = 1; at[5] = 1; at[6] = 3;
    put64(8, 4u << 20); put64(16, start); put64(24, stop);
    put32(32, 0); put32(36, 1); put32(40, 13); put32(44, correlation); end();
}

static void api_of(uint32_t cbid, uint32_t thread, uint64_t start, uint64_t stop, uint32_t correlation) {
    begin(4); put32(4, cbid); put64(8, start); put64(16, stop); put32(28, thread);
    put32(32, correlation); end();
}

/* flags: 1 instant, 2 start, 4 end; on a thread (object kind 2). */
static void marker_of(uint32_t flags, uint32_t id, uint32_t thread, uint64_t time, const char *name, const char *domain) {
    begin(12); put32(4, flags); put64(8, time); put32(16, id); put32(20, 2); put32(28, thread);
    put64(40, (uint64_t)(uintptr_t)name); put64(48, (uint64_t)(uintptr_t)domain); end();
}

/* The scripted records of flush `number`, then the clock moved on. */
static void scripted_flush(int number) {
    for (int i = 0; i < step_count; i++) {
        struct step *s = &steps[i];
        if (s->flush != number) continue;
        if (strcmp(s->what, "marker") == 0) {
            uint32_t flags = strcmp(s->phase, "start") == 0 ? 2 : strcmp(s->phase, "end") == 0 ? 4 : 1;
            marker_of(flags, (uint32_t)s->a, (uint32_t)s->b, s->c, s->name, s->domain);
        } else if (strcmp(s->what, "api") == 0) {
            api_of((uint32_t)s->a, (uint32_t)s->b, s->c, s->d, (uint32_t)s->e);
        } else if (strcmp(s->what, "kernel") == 0) {
            kernel_of((uint32_t)s->a, s->b, s->c);
        } else if (strcmp(s->what, "copy") == 0) {
            copy_of((uint32_t)s->a, s->b, s->c);
        } else if (strcmp(s->what, "sync") == 0) {
            begin(38); put32(4, 3); put64(8, s->b); put64(16, s->c); put32(24, (uint32_t)s->a);
            put32(28, 1); put32(32, 7); put32(36, (uint32_t)-1); end();
        }
    }
    script_clock = number < flush_count ? flush_times[number + 1] : script_clock + 1000000u;
}

int cuptiActivityFlushAll(uint32_t flag) {
    uint8_t *buffer = 0;
    size_t size = 0, max = 0;
    if (!requested || !completed) return FAKE_ERROR;
    requested(&buffer, &size, &max);
    if (!buffer || size < 4096) return FAKE_ERROR;
    at = buffer;
    if (scripted < 0) read_script();
    if (scripted) {
        scripted_flush(++flushes);
        completed(0, 0, buffer, size, (size_t)(at - buffer));
        return OK;
    }
    uint64_t t = 1000000u * (uint64_t)(++flushes);
    if (flushes == 1) {
        begin(8); put32(40, 3); put32(44, 132); put32(104, 9); put32(108, 0); put32(112, 0);
        put64(136, (uint64_t)(uintptr_t)"Fake GPU"); end();
        begin(9); put32(4, 1); put32(8, 0); memcpy(at + 14, &(uint16_t){7}, 2); end();
        begin(37); put32(4, 1); put32(8, 13); put32(12, (uint32_t)-5); put32(16, 2); end();
    }
    kernel(t, t + 100);
    copy_of(12, t + 10, t + 90);
    begin(4); put32(4, 27); put64(8, t); put64(16, t + 5); put32(28, 99); put32(32, 13); end();
    begin(4); put32(4, 5); put64(8, t); put64(16, t + 1); end();
    begin(12); put32(4, 2); put64(8, t); put32(16, 5); put32(20, 2); put32(28, 99);
    put64(40, (uint64_t)(uintptr_t)"phase"); end();
    begin(12); put32(4, 4); put64(8, t + 200); put32(16, 5); put32(20, 2); put32(28, 99); end();
    begin(17); end();
    if (flag & 1) kernel(t + 300, 0);
    completed(0, 0, buffer, size, (size_t)(at - buffer));
    return OK;
}
