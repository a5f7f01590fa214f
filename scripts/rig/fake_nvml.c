/*
 * A fake libnvidia-ml.so.1 for the c3 test rig: the real pynvml binding loads it and asks it about GPUs
 * that exist only in a state file. Built by scripts/rig/fake_nvml.py against the real nvml.h (from the
 * nvidia-nvml-dev wheel) so every struct layout and constant is NVIDIA's own.
 *
 * Every call re-reads the state file named by $C3_FAKE_NVML_STATE, so a test can change GPUs and
 * processes while a poller is running. Processes come from two places: `proc` lines in the state file
 * ("strangers") and GPU registration files written by the stub engine into the registry directory
 * (format: scripts/rig/README.md). The same rules are implemented in Python by backend/stub_registry.py.
 */
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_GPUS 64
#define MAX_PROCS 512
#define MIB 1048576ULL

enum { F_NOMEM = 1, F_NOTEMP = 2, F_NOPOWER = 4, F_NOUTIL = 8, F_NOECC = 16, F_NOPROCS = 32, F_LOST = 64,
       F_NOLIMIT = 128, F_NOFAN = 256 };

struct nvmlDevice_st { unsigned int index; };
static struct nvmlDevice_st devices[MAX_GPUS];

typedef struct {
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], pci[32];
    unsigned long long total_mib, reserved_mib, used_mib;
    int sm_major, sm_minor, temp, ecc;
    unsigned int util, mem_util, fan, flags;
    double power_w, limit_w;
} gpu_t;

typedef struct { char gpu[NVML_DEVICE_UUID_V2_BUFFER_SIZE]; unsigned int pid; unsigned long long mib; char name[64]; } proc_t;

typedef struct {
    gpu_t gpus[MAX_GPUS];
    int ngpus;
    proc_t procs[MAX_PROCS]; /* strangers from the state file, then live registrations */
    int nprocs;
    char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE], nvml[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    char registry[4096];
    int cuda, init_error;
} state_t;

static state_t st;
static int refcount;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------ state file */

/* Next `key=value` (value optionally "quoted") from *p; returns 0 at end of line. */
static int next_pair(char **p, char **key, char **value) {
    char *s = *p;
    while (*s && isspace((unsigned char)*s)) s++;
    if (!*s) return 0;
    *key = s;
    while (*s && *s != '=' && !isspace((unsigned char)*s)) s++;
    if (*s != '=') { *value = s; if (*s) *s++ = 0; *p = s; return 1; }
    *s++ = 0;
    if (*s == '"') {
        *value = ++s;
        while (*s && *s != '"') s++;
    } else {
        *value = s;
        while (*s && !isspace((unsigned char)*s)) s++;
    }
    if (*s) *s++ = 0;
    *p = s;
    return 1;
}

static void copy(char *dst, size_t size, const char *src) { snprintf(dst, size, "%s", src); }

static unsigned int parse_flags(const char *v) {
    static const struct { const char *name; unsigned int bit; } names[] = {
        {"nomem", F_NOMEM}, {"notemp", F_NOTEMP}, {"nopower", F_NOPOWER}, {"noutil", F_NOUTIL},
        {"noecc", F_NOECC}, {"noprocs", F_NOPROCS}, {"lost", F_LOST}, {"nolimit", F_NOLIMIT}, {"nofan", F_NOFAN}};
    unsigned int flags = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strstr(v, names[i].name)) flags |= names[i].bit;
    return flags;
}

static void parse_gpu(char *rest) {
    if (st.ngpus >= MAX_GPUS) return;
    gpu_t *g = &st.gpus[st.ngpus];
    memset(g, 0, sizeof *g);
    g->total_mib = 24576; g->sm_major = 8; g->sm_minor = 6; g->temp = 40; g->power_w = 30; g->limit_w = 350;
    snprintf(g->uuid, sizeof g->uuid, "GPU-fake0000-0000-0000-0000-%012d", st.ngpus);
    snprintf(g->name, sizeof g->name, "NVIDIA GeForce RTX 3090");
    snprintf(g->pci, sizeof g->pci, "00000000:%02X:00.0", st.ngpus + 1);
    char *key, *v;
    while (next_pair(&rest, &key, &v)) {
        if (!strcmp(key, "uuid")) copy(g->uuid, sizeof g->uuid, v);
        else if (!strcmp(key, "name")) copy(g->name, sizeof g->name, v);
        else if (!strcmp(key, "pci")) copy(g->pci, sizeof g->pci, v);
        else if (!strcmp(key, "total_mib")) g->total_mib = strtoull(v, NULL, 10);
        else if (!strcmp(key, "reserved_mib")) g->reserved_mib = strtoull(v, NULL, 10);
        else if (!strcmp(key, "used_mib")) g->used_mib = strtoull(v, NULL, 10);
        else if (!strcmp(key, "sm")) sscanf(v, "%d.%d", &g->sm_major, &g->sm_minor);
        else if (!strcmp(key, "util")) g->util = (unsigned int)atoi(v);
        else if (!strcmp(key, "mem_util")) g->mem_util = (unsigned int)atoi(v);
        else if (!strcmp(key, "fan")) g->fan = (unsigned int)atoi(v);
        else if (!strcmp(key, "temp")) g->temp = atoi(v);
        else if (!strcmp(key, "power_w")) g->power_w = strtod(v, NULL);
        else if (!strcmp(key, "limit_w")) g->limit_w = strtod(v, NULL);
        else if (!strcmp(key, "ecc")) g->ecc = atoi(v);
        else if (!strcmp(key, "flags")) g->flags = parse_flags(v);
    }
    st.ngpus++;
}

static void parse_proc(char *rest) {
    if (st.nprocs >= MAX_PROCS) return;
    proc_t *p = &st.procs[st.nprocs];
    memset(p, 0, sizeof *p);
    char *key, *v;
    while (next_pair(&rest, &key, &v)) {
        if (!strcmp(key, "gpu")) copy(p->gpu, sizeof p->gpu, v);
        else if (!strcmp(key, "pid")) p->pid = (unsigned int)strtoul(v, NULL, 10);
        else if (!strcmp(key, "used_mib")) p->mib = strtoull(v, NULL, 10);
        else if (!strcmp(key, "name")) copy(p->name, sizeof p->name, v);
    }
    if (p->pid && p->gpu[0]) st.nprocs++;
}

/* ------------------------------------------------------------------ registrations */

static int read_file(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = 0;
    return (int)n;
}

static int pid_alive(unsigned int pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    if (read_file(path, buf, sizeof buf) <= 0) return 0;
    char *end = strrchr(buf, ')');
    return end && end[1] && end[2] != 'Z';
}

/* Does host pid `pid` belong to container `cid` (cgroup mentions the id) with `nspid` as its last NSpid? */
static int is_container_pid(unsigned int pid, const char *cid, unsigned int nspid) {
    static char buf[16384];
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/cgroup", pid);
    if (read_file(path, buf, sizeof buf) <= 0 || !strstr(buf, cid)) return 0;
    snprintf(path, sizeof path, "/proc/%u/status", pid);
    if (read_file(path, buf, sizeof buf) <= 0) return 0;
    char *line = strstr(buf, "\nNSpid:");
    if (!line) return 0;
    line += 7;
    char *eol = strchr(line, '\n');
    if (eol) *eol = 0;
    char *last = NULL, *tok, *save;
    for (tok = strtok_r(line, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) last = tok;
    return last && (unsigned int)strtoul(last, NULL, 10) == nspid && pid_alive(pid);
}

/* Host pid of the process with pid `nspid` in container `cid`, 0 when gone. A small cache (checked
 * again on every use) spares a /proc scan per NVML call while a poller runs. */
static unsigned int resolve_host_pid(const char *cid, unsigned int nspid) {
    static struct { char cid[128]; unsigned int nspid, host; } cache[64];
    static int next;
    for (int i = 0; i < 64; i++)
        if (cache[i].host && cache[i].nspid == nspid && !strcmp(cache[i].cid, cid)) {
            if (is_container_pid(cache[i].host, cid, nspid)) return cache[i].host;
            cache[i].host = 0;
        }
    DIR *proc = opendir("/proc");
    if (!proc) return 0;
    struct dirent *e;
    unsigned int found = 0;
    while (!found && (e = readdir(proc))) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        unsigned int pid = (unsigned int)strtoul(e->d_name, NULL, 10);
        if (is_container_pid(pid, cid, nspid)) found = pid;
    }
    closedir(proc);
    if (found) {
        copy(cache[next].cid, sizeof cache[next].cid, cid);
        cache[next].nspid = nspid;
        cache[next].host = found;
        next = (next + 1) % 64;
    }
    return found;
}

static void load_registration(const char *path, const char *own_ns) {
    static char buf[65536];
    /* A file whose process was found dead stays dead (a restarted engine rewrites its file: new inode). */
    static struct { ino_t ino; long long mtime_ns; } dead[256];
    static int next_dead;
    struct stat sb;
    if (stat(path, &sb) != 0) return;
    long long mtime_ns = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
    for (int i = 0; i < 256; i++)
        if (dead[i].ino == sb.st_ino && dead[i].mtime_ns == mtime_ns) return;
    if (read_file(path, buf, sizeof buf) <= 0) return;
    unsigned int pid = 0;
    char pidns[64] = "", container[128] = "", name[64] = "";
    char *save, *line;
    for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (sscanf(line, "pid %u", &pid) == 1) continue;
        if (sscanf(line, "pidns %63s", pidns) == 1) continue;
        if (sscanf(line, "container %127s", container) == 1) continue;
        if (sscanf(line, "name %63s", name) == 1) continue;
    }
    if (!pid) return;
    unsigned int host_pid = (!container[0] || !strcmp(pidns, own_ns)) ? (pid_alive(pid) ? pid : 0)
                                                                      : resolve_host_pid(container, pid);
    if (!host_pid) { /* the process is gone: a stale file from a crash */
        dead[next_dead].ino = sb.st_ino;
        dead[next_dead].mtime_ns = mtime_ns;
        next_dead = (next_dead + 1) % 256;
        return;
    }
    read_file(path, buf, sizeof buf);
    for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char token[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        unsigned long long mib;
        double fraction;
        if (sscanf(line, "gpu %95s %llu %lf", token, &mib, &fraction) != 3) continue;
        for (int i = 0; i < st.ngpus && st.nprocs < MAX_PROCS; i++) {
            gpu_t *g = &st.gpus[i];
            char index[16];
            snprintf(index, sizeof index, "%d", i);
            if (strcmp(token, "all") && strcmp(token, g->uuid) && strcmp(token, index)) continue;
            proc_t *p = &st.procs[st.nprocs++];
            copy(p->gpu, sizeof p->gpu, g->uuid);
            p->pid = host_pid;
            p->mib = mib ? mib : (unsigned long long)ceil((double)g->total_mib * fraction);
            copy(p->name, sizeof p->name, name[0] ? name : "python3");
        }
    }
}

static void load_registry(void) {
    const char *dir = st.registry[0] ? st.registry : getenv("C3_GPU_REGISTRY");
    if (!dir || !*dir) return;
    DIR *d = opendir(dir);
    if (!d) return;
    char own_ns[64] = "";
    ssize_t n = readlink("/proc/self/ns/pid", own_ns, sizeof own_ns - 1);
    own_ns[n > 0 ? n : 0] = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".gpu")) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        load_registration(path, own_ns);
    }
    closedir(d);
}

/* Re-read everything. Returns NVML_SUCCESS or why NVML would not work at all. */
static nvmlReturn_t load_state(void) {
    const char *path = getenv("C3_FAKE_NVML_STATE");
    memset(&st, 0, sizeof st);
    copy(st.driver, sizeof st.driver, "580.95.05");
    copy(st.nvml, sizeof st.nvml, "13.580.95.05");
    st.cuda = 13000;
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return NVML_ERROR_DRIVER_NOT_LOADED;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *rest = line;
        while (isspace((unsigned char)*rest)) rest++;
        if (!*rest || *rest == '#') continue;
        char *kind = rest;
        while (*rest && !isspace((unsigned char)*rest)) rest++;
        if (*rest) *rest++ = 0;
        while (isspace((unsigned char)*rest)) rest++;
        if (!strcmp(kind, "gpu")) parse_gpu(rest);
        else if (!strcmp(kind, "proc")) parse_proc(rest);
        else if (!strcmp(kind, "driver")) copy(st.driver, sizeof st.driver, rest);
        else if (!strcmp(kind, "nvml")) copy(st.nvml, sizeof st.nvml, rest);
        else if (!strcmp(kind, "cuda")) st.cuda = atoi(rest);
        else if (!strcmp(kind, "registry")) copy(st.registry, sizeof st.registry, rest);
        else if (!strcmp(kind, "init_error")) st.init_error = atoi(rest);
    }
    fclose(f);
    return NVML_SUCCESS;
}

/* Processes (strangers + registrations) are only needed by memory and process queries. */
static int registry_loaded;
static void need_processes(void) {
    if (!registry_loaded) load_registry();
    registry_loaded = 1;
}

/* Lock, re-read the state, check init and the handle; on success *g is the device (when asked for). */
static nvmlReturn_t enter(nvmlDevice_t device, gpu_t **g) {
    pthread_mutex_lock(&lock);
    if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t ret = load_state();
    registry_loaded = 0;
    if (ret != NVML_SUCCESS) return ret;
    if (!g) return NVML_SUCCESS;
    if (device < devices || device >= devices + MAX_GPUS || (int)device->index >= st.ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    *g = &st.gpus[device->index];
    return ((*g)->flags & F_LOST) ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

#define LEAVE(ret) do { nvmlReturn_t r_ = (ret); pthread_mutex_unlock(&lock); return r_; } while (0)
#define ENTER(dev, g) do { nvmlReturn_t e_ = enter((dev), (g)); if (e_ != NVML_SUCCESS) LEAVE(e_); } while (0)

static nvmlReturn_t put_string(char *dst, unsigned int length, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------ init, system */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    pthread_mutex_lock(&lock);
    nvmlReturn_t ret = load_state();
    if (ret == NVML_SUCCESS && st.init_error) ret = (nvmlReturn_t)st.init_error;
    if (ret == NVML_SUCCESS) refcount++;
    LEAVE(ret);
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&lock);
    if (refcount <= 0) LEAVE(NVML_ERROR_UNINITIALIZED);
    refcount--;
    LEAVE(NVML_SUCCESS);
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_NO_DATA: return "No data";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    ENTER(NULL, NULL);
    LEAVE(put_string(version, length, st.driver));
}
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    ENTER(NULL, NULL);
    LEAVE(put_string(version, length, st.nvml));
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    ENTER(NULL, NULL);
    if (!v) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *v = st.cuda;
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
    ENTER(NULL, NULL);
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    if (read_file(path, buf, sizeof buf) > 0) {
        buf[strcspn(buf, "\n")] = 0;
        LEAVE(put_string(name, length, buf));
    }
    need_processes();
    for (int i = 0; i < st.nprocs; i++)
        if (st.procs[i].pid == pid && st.procs[i].name[0]) LEAVE(put_string(name, length, st.procs[i].name));
    LEAVE(NVML_ERROR_NOT_FOUND);
}

/* ------------------------------------------------------------------ device lookup */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    ENTER(NULL, NULL);
    if (!count) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *count = (unsigned int)st.ngpus;
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    ENTER(NULL, NULL);
    if (!device || index >= (unsigned int)st.ngpus) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    devices[index].index = index;
    *device = &devices[index];
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    ENTER(NULL, NULL);
    if (!uuid || !device) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < st.ngpus; i++)
        if (!strcmp(st.gpus[i].uuid, uuid)) {
            devices[i].index = (unsigned int)i;
            *device = &devices[i];
            LEAVE(NVML_SUCCESS);
        }
    LEAVE(NVML_ERROR_NOT_FOUND);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *device) {
    ENTER(NULL, NULL);
    if (!bus || !device) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < st.ngpus; i++)
        if (!strcasecmp(st.gpus[i].pci, bus)) {
            devices[i].index = (unsigned int)i;
            *device = &devices[i];
            LEAVE(NVML_SUCCESS);
        }
    LEAVE(NVML_ERROR_NOT_FOUND);
}

/* ------------------------------------------------------------------ device queries */

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    gpu_t *g;
    ENTER(device, &g);
    if (!index) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *index = device->index;
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
    return nvmlDeviceGetIndex(device, minor);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    gpu_t *g;
    ENTER(device, &g);
    LEAVE(put_string(name, length, g->name));
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    gpu_t *g;
    ENTER(device, &g);
    LEAVE(put_string(uuid, length, g->uuid));
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    gpu_t *g;
    ENTER(device, &g);
    if (!pci) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    memset(pci, 0, sizeof *pci);
    copy(pci->busId, sizeof pci->busId, g->pci);
    sscanf(g->pci, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", pci->domain & 0xffff, pci->bus,
             pci->device);
    pci->pciDeviceId = 0x220410DE;
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) { return nvmlDeviceGetPciInfo_v3(device, pci); }
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) { return nvmlDeviceGetPciInfo_v3(device, pci); }

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    gpu_t *g;
    ENTER(device, &g);
    if (!major || !minor) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *major = g->sm_major;
    *minor = g->sm_minor;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch) {
    gpu_t *g;
    ENTER(device, &g);
    if (!arch) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    int sm = g->sm_major * 10 + g->sm_minor;
    *arch = sm >= 100 ? NVML_DEVICE_ARCH_BLACKWELL : sm >= 90 ? NVML_DEVICE_ARCH_HOPPER
          : sm >= 89 ? NVML_DEVICE_ARCH_ADA : sm >= 80 ? NVML_DEVICE_ARCH_AMPERE
          : sm >= 75 ? NVML_DEVICE_ARCH_TURING : sm >= 70 ? NVML_DEVICE_ARCH_VOLTA : NVML_DEVICE_ARCH_PASCAL;
    LEAVE(NVML_SUCCESS);
}

/* Allocated MiB on a GPU: its base use plus every stranger and live registration on it. */
static unsigned long long allocated_mib(const gpu_t *g) {
    need_processes();
    unsigned long long mib = g->used_mib;
    char index[16];
    snprintf(index, sizeof index, "%d", (int)(g - st.gpus));
    for (int i = 0; i < st.nprocs; i++)
        if (!strcmp(st.procs[i].gpu, g->uuid) || !strcmp(st.procs[i].gpu, index)) mib += st.procs[i].mib;
    unsigned long long cap = g->total_mib > g->reserved_mib ? g->total_mib - g->reserved_mib : 0;
    return mib < cap ? mib : cap;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    gpu_t *g;
    ENTER(device, &g);
    if (!memory) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->flags & F_NOMEM) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    unsigned long long used = g->reserved_mib + allocated_mib(g); /* v1 counts reserved as used */
    memory->total = g->total_mib * MIB;
    memory->used = used * MIB;
    memory->free = (g->total_mib - used) * MIB;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    gpu_t *g;
    ENTER(device, &g);
    if (!memory) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (memory->version != nvmlMemory_v2) LEAVE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (g->flags & F_NOMEM) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    unsigned long long used = allocated_mib(g);
    memory->total = g->total_mib * MIB;
    memory->reserved = g->reserved_mib * MIB;
    memory->used = used * MIB;
    memory->free = (g->total_mib - g->reserved_mib - used) * MIB;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util) {
    gpu_t *g;
    ENTER(device, &g);
    if (!util) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->flags & F_NOUTIL) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    util->gpu = g->util;
    util->memory = g->mem_util;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int *temp) {
    gpu_t *g;
    ENTER(device, &g);
    if (!temp || sensor != NVML_TEMPERATURE_GPU) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->flags & F_NOTEMP) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *temp = (unsigned int)g->temp;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temperature) {
    gpu_t *g;
    ENTER(device, &g);
    if (!temperature) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (temperature->version != nvmlTemperature_v1) LEAVE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (temperature->sensorType != NVML_TEMPERATURE_GPU) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->flags & F_NOTEMP) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    temperature->temperature = g->temp;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *mw) {
    gpu_t *g;
    ENTER(device, &g);
    if (!mw) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->flags & F_NOPOWER) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *mw = (unsigned int)llround(g->power_w * 1000.0);
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *mw) {
    gpu_t *g;
    ENTER(device, &g);
    if (!mw) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->flags & (F_NOPOWER | F_NOLIMIT)) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *mw = (unsigned int)llround(g->limit_w * 1000.0);
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *mw) {
    return nvmlDeviceGetEnforcedPowerLimit(device, mw);
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed) {
    gpu_t *g;
    ENTER(device, &g);
    if (!speed) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->flags & F_NOFAN) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *speed = g->fan;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current, nvmlEnableState_t *pending) {
    gpu_t *g;
    ENTER(device, &g);
    if (!current || !pending) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->flags & F_NOECC) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *current = *pending = g->ecc ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    LEAVE(NVML_SUCCESS);
}

/* ------------------------------------------------------------------ processes (two-call protocol) */

typedef enum { PI_V1, PI_V2 } pi_kind;

static nvmlReturn_t compute_procs(nvmlDevice_t device, unsigned int *count, void *infos, pi_kind kind) {
    gpu_t *g;
    ENTER(device, &g);
    if (!count) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->flags & F_NOPROCS) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    need_processes();
    char index[16];
    snprintf(index, sizeof index, "%u", device->index);
    unsigned int n = 0;
    for (int i = 0; i < st.nprocs; i++)
        if (!strcmp(st.procs[i].gpu, g->uuid) || !strcmp(st.procs[i].gpu, index)) n++;
    if (*count < n || (!infos && n)) {
        *count = n;
        LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    unsigned int k = 0;
    for (int i = 0; i < st.nprocs; i++) {
        if (strcmp(st.procs[i].gpu, g->uuid) && strcmp(st.procs[i].gpu, index)) continue;
        if (kind == PI_V1) {
            nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)infos + k;
            p->pid = st.procs[i].pid;
            p->usedGpuMemory = st.procs[i].mib * MIB;
        } else {
            nvmlProcessInfo_v2_t *p = (nvmlProcessInfo_v2_t *)infos + k;
            p->pid = st.procs[i].pid;
            p->usedGpuMemory = st.procs[i].mib * MIB;
            p->gpuInstanceId = p->computeInstanceId = 0xFFFFFFFFu;
        }
        k++;
    }
    *count = n;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *i) {
    return compute_procs(d, c, i, PI_V2);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *i) {
    return compute_procs(d, c, i, PI_V2);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *i) {
    return compute_procs(d, c, i, PI_V1);
}

static nvmlReturn_t no_procs(nvmlDevice_t device, unsigned int *count) {
    gpu_t *g;
    ENTER(device, &g);
    if (!count) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *count = 0;
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *i) {
    (void)i;
    return no_procs(d, c);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *i) {
    (void)i;
    return no_procs(d, c);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *i) {
    (void)i;
    return no_procs(d, c);
}
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *i) {
    (void)i;
    return no_procs(d, c);
}
