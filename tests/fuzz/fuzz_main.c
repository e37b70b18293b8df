/*
 * fuzz_main.c — a bounded mutation driver for LLVMFuzzerTestOneInput where libFuzzer is missing
 * (no clang). Same command line as libFuzzer for what `make fuzz` uses:
 *
 *   fuzz_x [-max_total_time=S] [-runs=N] [-max_len=N] [-seed=N] [-dict=FILE] FILE|DIR...
 *
 * Runs every file given (or found in a folder) once, as libFuzzer replays a corpus; then, while
 * time and runs are left, mutates a random seed (bit flips, byte insertions and deletions,
 * copies of a span, splices with another seed, dictionary tokens) and runs that. No coverage
 * feedback: a sanitizer (ASan/UBSan) finds what goes wrong. Prints one summary line at the end;
 * a crash ends the process, as under libFuzzer. Seeded: the same seed gives the same inputs.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The sanitizers' own report stream (present when built with ASan or UBSan). */
void __sanitizer_set_report_fd(void *fd) __attribute__((weak));

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct buf {
    uint8_t *p;
    size_t n;
} buf_t;

static buf_t g_seeds[4096], g_dict[512];
static int g_n_seeds, g_n_dict;
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ull;
}

static size_t pick(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

/* Append the file at path to the seeds (files over max_len are cut). */
static void add_file(const char *path, size_t max_len)
{
    FILE *f = fopen(path, "rb");
    if (!f || g_n_seeds == (int)(sizeof g_seeds / sizeof g_seeds[0])) {
        if (f) fclose(f);
        return;
    }
    buf_t b = {malloc(max_len + 1), 0};
    if (b.p) b.n = fread(b.p, 1, max_len, f);
    fclose(f);
    if (b.p) g_seeds[g_n_seeds++] = b;
}

static void add_path(const char *path, size_t max_len)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return;
    if (!S_ISDIR(sb.st_mode)) {
        add_file(path, max_len);
        return;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[4096];
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) add_file(p, max_len);
    }
    if (d) closedir(d);
}

/* libFuzzer dictionary lines: name="token" (no escapes beyond \" and \\). */
static void load_dict(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f) && g_n_dict < (int)(sizeof g_dict / sizeof g_dict[0])) {
        char *q = strchr(line, '"'), *e = strrchr(line, '"');
        if (line[0] == '#' || !q || e <= q) continue;
        buf_t t = {malloc((size_t)(e - q)), 0};
        for (char *c = q + 1; t.p && c < e; c++)
            t.p[t.n++] = (uint8_t)(*c == '\\' && c + 1 < e ? *++c : *c);
        if (t.p) g_dict[g_n_dict++] = t;
    }
    if (f) fclose(f);
}

/* One random edit of b (capacity max_len). */
static void mutate_once(uint8_t *b, size_t *n, size_t max_len)
{
    size_t at = pick(*n + 1);
    switch (rnd() % 6) {
    case 0: /* flip a bit */
        if (*n) b[pick(*n)] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    case 1: /* insert a random byte */
        if (*n < max_len) memmove(b + at + 1, b + at, *n - at), b[at] = (uint8_t)rnd(), ++*n;
        break;
    case 2: { /* delete a span */
        size_t len = pick(*n - at + 1) % 16;
        memmove(b + at, b + at + len, *n - at - len), *n -= len;
        break;
    }
    case 3: { /* copy a span of itself over another place */
        size_t from = pick(*n + 1), len = pick(*n - from + 1) % 64;
        if (at + len <= *n) memmove(b + at, b + from, len);
        break;
    }
    case 4: { /* splice: the tail of another seed */
        const buf_t *o = &g_seeds[pick((size_t)g_n_seeds)];
        size_t from = pick(o->n + 1), len = o->n - from;
        if (at + len > max_len) len = max_len - at;
        memcpy(b + at, o->p + from, len), *n = at + len;
        break;
    }
    default: { /* insert a dictionary token */
        if (!g_n_dict) break;
        const buf_t *t = &g_dict[pick((size_t)g_n_dict)];
        if (*n + t->n > max_len) break;
        memmove(b + at + t->n, b + at, *n - at), memcpy(b + at, t->p, t->n), *n += t->n;
        break;
    }
    }
}

int main(int argc, char **argv)
{
    double max_time = 10;
    long runs = -1, max_len = 4096;
    for (int i = 1; i < argc; i++) {
        if (sscanf(argv[i], "-max_total_time=%lf", &max_time) == 1) continue;
        if (sscanf(argv[i], "-runs=%ld", &runs) == 1) continue;
        if (sscanf(argv[i], "-max_len=%ld", &max_len) == 1) continue;
        if (sscanf(argv[i], "-seed=%lu", (unsigned long *)&g_rng) == 1) continue;
        if (!strncmp(argv[i], "-dict=", 6)) load_dict(argv[i] + 6);
        if (argv[i][0] != '-') add_path(argv[i], (size_t)max_len);
    }
    if (g_rng == 0) g_rng = 1;
    /* As libFuzzer's -close_fd_mask=2: the readers' messages go nowhere, reports and the summary
     * to the real stderr. */
    int err = dup(2), null = open("/dev/null", O_WRONLY);
    FILE *out = err >= 0 ? fdopen(err, "w") : NULL;
    if (out && null >= 0) {
        if (__sanitizer_set_report_fd) __sanitizer_set_report_fd((void *)(intptr_t)err);
        dup2(null, 2);
    }
    if (null >= 0) close(null);
    if (!out) out = stderr;
    for (int i = 0; i < g_n_seeds; i++)
        LLVMFuzzerTestOneInput(g_seeds[i].p, g_seeds[i].n);
    uint8_t *b = malloc((size_t)max_len + 1);
    long done = 0;
    clock_t t0 = clock();
    while (b && g_n_seeds && (runs < 0 || done < runs) &&
           (double)(clock() - t0) / CLOCKS_PER_SEC < max_time) {
        const buf_t *s = &g_seeds[pick((size_t)g_n_seeds)];
        size_t n = s->n;
        memcpy(b, s->p, n);
        for (int k = 1 + (int)pick(4); k > 0; k--)
            mutate_once(b, &n, (size_t)max_len);
        LLVMFuzzerTestOneInput(b, n);
        done++;
    }
    fprintf(out, "fuzz_main: %d seeds replayed, %ld mutated inputs in %.1f s: no crash\n",
            g_n_seeds, done, (double)(clock() - t0) / CLOCKS_PER_SEC);
    free(b);
    for (int i = 0; i < g_n_seeds; i++)
        free(g_seeds[i].p);
    for (int i = 0; i < g_n_dict; i++)
        free(g_dict[i].p);
    return 0;
}
