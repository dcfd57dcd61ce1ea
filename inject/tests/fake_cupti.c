/* A stand-in for libcupti, for the CPU test of the injected recorder (tests/record.rs): the
 * CUPTI entry points the recorder calls, with records made up at the offsets cupti_activity.h
 * gives (CUDA 13.0). Every flush hands over one buffer of records; the first brings the
 * device, context and stream records too, and CUPTI's own dropped count; a forced flush adds
 * a kernel still running (no end). SYNCHRONIZATION cannot be enabled here. */
#include <stdint.h>
#include <stddef.h>
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

int cuptiGetTimestamp(uint64_t *ns) {
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
    return OK;
}

int cuptiActivityGetNumDroppedRecords(void *context, uint32_t stream, size_t *dropped) {
    (void)context; (void)stream;
    *dropped = dropped_said ? 0 : 2;
    dropped_said = 1;
    return OK;
}

/* Driver 2 and 27, 5 (not kept by the recorder); runtime 131. */
int cuptiGetCallbackName(int domain, uint32_t cbid, const char **name) {
    *name = 0;
    if (domain == 1 && cbid == 2) *name = "cuDriverGetVersion";
    if (domain == 1 && cbid == 5) *name = "cuDeviceGet";
    if (domain == 1 && cbid == 27) *name = "cuMemAlloc_v2";
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

static void kernel(uint64_t start, uint64_t stop) {
    begin(10);
    put64(16, start); put64(24, stop);
    put32(40, 0); put32(44, 1); put32(48, 7); /* device, context, stream */
    put32(52, 64); put32(56, 1); put32(60, 1); put32(64, 256); put32(68, 1); put32(72, 1);
    put32(92, 11);
    put64(104, (uint64_t)(uintptr_t)"fake_kernel");
    end();
}

int cuptiActivityFlushAll(uint32_t flag) {
    uint8_t *buffer = 0;
    size_t size = 0, max = 0;
    if (!requested || !completed) return FAKE_ERROR;
    requested(&buffer, &size, &max);
    if (!buffer || size < 4096) return FAKE_ERROR;
    at = buffer;
    uint64_t t = 1000000u * (uint64_t)(++flushes);
    if (flushes == 1) {
        begin(8); put32(40, 3); put32(44, 132); put32(104, 9); put32(108, 0); put32(112, 0);
        put64(136, (uint64_t)(uintptr_t)"Fake GPU"); end();
        begin(9); put32(4, 1); put32(8, 0); memcpy(at + 14, &(uint16_t){7}, 2); end();
        begin(37); put32(4, 1); put32(8, 13); put32(12, (uint32_t)-5); put32(16, 2); end();
    }
    kernel(t, t + 100);
    /* A pageable host-to-device copy of 4 MiB on stream 13. */
    begin(1); at[4] = 1; at[5] = 1; at[6] = 3;
    put64(8, 4u << 20); put64(16, t + 10); put64(24, t + 90);
    put32(32, 0); put32(36, 1); put32(40, 13); put32(44, 12); end();
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
