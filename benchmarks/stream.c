/* STREAM-style reference for gpuscope's memory probes (benchmarks only; never shipped).
 * Same kernels and byte-counting rule as McCalpin's STREAM: copy 2 arrays, scale 2, add 3,
 * triad 3, 8-byte doubles, best rate of NTIMES after discarding the first.
 * Arrays get madvise(MADV_HUGEPAGE) unless STREAM_NO_HUGEPAGE is set in the environment
 * (numpy and torch ask for huge pages on large arrays; under a hypervisor 4 KiB pages cost a lot).
 * Build: gcc -O3 -march=native -fopenmp stream.c -o stream ; run: ./stream [elements] [ntimes]
 * Prints one JSON object with the best rate of each kernel in B/s (GB = 1e9 B).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <float.h>
#include <string.h>
#include <sys/mman.h>

static double *a, *b, *c;

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 80000000L; /* 640 MB per array */
    int ntimes = argc > 2 ? atoi(argv[2]) : 20;
    a = aligned_alloc(64, n * sizeof(double));
    b = aligned_alloc(64, n * sizeof(double));
    c = aligned_alloc(64, n * sizeof(double));
    if (!a || !b || !c) { fprintf(stderr, "allocation failed\n"); return 1; }
    int huge = getenv("STREAM_NO_HUGEPAGE") == NULL;
    if (huge) {
        madvise(a, n * sizeof(double), MADV_HUGEPAGE);
        madvise(b, n * sizeof(double), MADV_HUGEPAGE);
        madvise(c, n * sizeof(double), MADV_HUGEPAGE);
    }
#pragma omp parallel for
    for (long j = 0; j < n; j++) { a[j] = 1.0; b[j] = 2.0; c[j] = 0.0; }
    double scalar = 3.0;
    double best[4] = {DBL_MAX, DBL_MAX, DBL_MAX, DBL_MAX};
    double bytes[4] = {2.0 * 8 * n, 2.0 * 8 * n, 3.0 * 8 * n, 3.0 * 8 * n};
    for (int k = 0; k < ntimes; k++) {
        double t;
        t = omp_get_wtime();
#pragma omp parallel for
        for (long j = 0; j < n; j++) c[j] = a[j];
        t = omp_get_wtime() - t; if (k && t < best[0]) best[0] = t;
        t = omp_get_wtime();
#pragma omp parallel for
        for (long j = 0; j < n; j++) b[j] = scalar * c[j];
        t = omp_get_wtime() - t; if (k && t < best[1]) best[1] = t;
        t = omp_get_wtime();
#pragma omp parallel for
        for (long j = 0; j < n; j++) c[j] = a[j] + b[j];
        t = omp_get_wtime() - t; if (k && t < best[2]) best[2] = t;
        t = omp_get_wtime();
#pragma omp parallel for
        for (long j = 0; j < n; j++) a[j] = b[j] + scalar * c[j];
        t = omp_get_wtime() - t; if (k && t < best[3]) best[3] = t;
    }
    /* checksum so the compiler cannot drop the loops */
    double sum = 0; for (long j = 0; j < n; j += 4096) sum += a[j] + b[j] + c[j];
    printf("{\"elements\": %ld, \"hugepages\": %s, \"threads\": %d, \"ntimes\": %d, \"copy_bytes_per_s\": %.6e, "
           "\"scale_bytes_per_s\": %.6e, \"add_bytes_per_s\": %.6e, \"triad_bytes_per_s\": %.6e, \"checksum\": %.6e}\n",
           n, huge ? "true" : "false", omp_get_max_threads(), ntimes, bytes[0] / best[0], bytes[1] / best[1], bytes[2] / best[2], bytes[3] / best[3], sum);
    return 0;
}
