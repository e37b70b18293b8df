/*
 * p2p_report.c — bench_p2p's output (p2p_report.h): a table line and a JSON line per row. NCCL's
 * refusals are free text: they are escaped for JSON here. Writes to stdout only.
 */
#include "p2p_report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void p2p_report_header(void)
{
    printf("# %-9s %-20s %5s %9s %9s %9s %8s %8s %8s %8s\n", "transport", "knob", "size", "median",
           "p10", "p90", "rate", "b2b", "GEMM src", "GEMM dst");
    printf("# %-9s %-20s %5s %9s %9s %9s %8s %8s %8s %8s\n", "", "", "MiB", "us", "us", "us",
           "GB/s", "GB/s", "slow %", "slow %");
}

static double rate(int mib, double us)
{
    return (double)mib * 1048576.0 / (us * 1e3);
}

void p2p_report_line(const p2p_report_row_t *r)
{
    if (!r->supported) {
        printf("  %-9s %-20s %5s unsupported: %s\n", r->transport, r->knob, "-", r->why);
    } else {
        char s[2][16];
        for (int i = 0; i < 2; i++)
            if (isnan(r->slow[i]))
                snprintf(s[i], sizeof s[i], "-");
            else
                snprintf(s[i], sizeof s[i], "%.1f", r->slow[i]);
        printf("  %-9s %-20s %5d %9.2f %9.2f %9.2f %8.1f %8.1f %8s %8s\n", r->transport, r->knob,
               r->mib, r->us, r->p10, r->p90, rate(r->mib, r->us), rate(r->mib, r->b2b_us), s[0],
               s[1]);
    }
    fflush(stdout);
}

/* s as the body of a JSON string: quotes, backslashes and control characters escaped. */
static void json_str(char *out, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s && k + 7 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            out[k++] = '\\', out[k++] = (char)c;
        else if (c < 0x20)
            k += (size_t)snprintf(out + k, n - k, "\\u%04x", c);
        else
            out[k++] = (char)c;
    }
    out[k] = 0;
}

/* v with 3 decimals, or null where NAN. */
static const char *num(char *out, size_t n, double v)
{
    if (isnan(v))
        snprintf(out, n, "null");
    else
        snprintf(out, n, "%.3f", v);
    return out;
}

void p2p_report_json(const p2p_report_row_t *r, const char *device, int src, int dst,
                     double window_us)
{
    char dev[256], why[700], f[6][32];
    json_str(dev, sizeof dev, device);
    printf("{\"bench\":\"p2p\",\"device\":\"%s\",\"src\":%d,\"dst\":%d,\"variant\":\"%s\","
           "\"transport\":\"%s\",\"knob\":\"%s\",",
           dev, src, dst, r->variant, r->transport, r->knob);
    if (!r->supported) {
        json_str(why, sizeof why, r->why);
        printf("\"supported\":false,\"why\":\"%s\"}\n", why);
        return;
    }
    printf("\"supported\":true,\"mib\":%d,\"bytes\":%.0f,\"us\":%.3f,\"us_p10\":%.3f,"
           "\"us_p90\":%.3f,\"gbs\":%.2f,\"b2b_us\":%.3f,\"b2b_gbs\":%.2f,\"window_us\":%.3f,",
           r->mib, r->mib * 1048576.0, r->us, r->p10, r->p90, rate(r->mib, r->us), r->b2b_us,
           rate(r->mib, r->b2b_us), window_us);
    for (int i = 0; i < 2; i++) {
        const double ok = isnan(r->slow[i]) ? NAN : 1.0;
        printf("\"gemm_slowdown_%s_pct\":%s,\"gemm_%s_alone_ms\":%s,\"gemm_%s_beside_ms\":%s,",
               i ? "dst" : "src", num(f[0], 32, r->slow[i]), i ? "dst" : "src",
               num(f[1], 32, ok * r->gemm_ms[i][0]), i ? "dst" : "src",
               num(f[2], 32, ok * r->gemm_ms[i][1]));
    }
    printf("\"late\":%d,\"uncovered\":%d}\n", r->late, r->uncovered);
}
