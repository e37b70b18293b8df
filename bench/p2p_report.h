/*
 * p2p_report.h — what bench_p2p measured, and how it prints it: the fixed-width table (one row per
 * transport, knob and size, or one `unsupported` row for a knob NCCL refused, with its message)
 * and one JSON line per row. Times are µs of one transfer; rates GB/s = bytes / time; the GEMM
 * slowdowns are NAN (printed "-", JSON null) where not measured. Printing only, to stdout;
 * nothing here touches the GPU.
 */
#ifndef PP_BENCH_P2P_REPORT_H
#define PP_BENCH_P2P_REPORT_H

#ifdef __cplusplus
extern "C" {
#endif

/* One row: a transport and knob at one size, or the knob's one unsupported row (mib 0). */
typedef struct p2p_report_row {
    const char *variant;   /* the name bench_p2p --variants takes */
    const char *transport; /* peer | nccl */
    const char *knob;      /* what differs from the transport's default */
    int mib;               /* transfer size */
    int supported;         /* 0: why says what refused it */
    char why[320];         /* one line */
    double us, p10, p90;   /* one transfer in a window: median, p10, p90 */
    double b2b_us;         /* one transfer of a run back to back (median) */
    double slow[2];        /* GEMM slowdown %, beside the source [0] and destination [1] */
    double gemm_ms[2][2];  /* [side][alone, beside]: the GEMM loop's median ms */
    int late;              /* windows and loops whose gate opened before the host was done */
    int uncovered;         /* GEMM loops the transfers did not outlast */
} p2p_report_row_t;

/* The table's two header lines. */
void p2p_report_header(void);
/* One table line, flushed. */
void p2p_report_line(const p2p_report_row_t *r);
/* One JSON line; window_us: the empty window's median, included in every latency. */
void p2p_report_json(const p2p_report_row_t *r, const char *device, int src, int dst,
                     double window_us);

#ifdef __cplusplus
}
#endif

#endif /* PP_BENCH_P2P_REPORT_H */
