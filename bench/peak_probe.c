/*
 * peak_probe.c — the machine's ceilings for the CPU kernels (bench/peak.c): f32
 * FMA, bf16 dot, int8 dot, AMX bf16/int8 where the CPU and kernel allow it, and
 * the streaming read bandwidth, on 1 thread and on all of them. A table on
 * stdout. Not a test: never part of ctest.
 *
 *   peak_probe [threads=online cores] [seconds per figure=0.1]
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "peak.h"

int main(int argc, char **argv) {
  int all = argc > 1 ? atoi(argv[1]) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  double secs = argc > 2 ? atof(argv[2]) : 0.1;
  if (all < 1 || !(secs > 0)) {
    fprintf(stderr, "peak_probe: usage: peak_probe [threads >= 1] [seconds > 0]\n");
    return 2;
  }
  char model[256];
  zz_peak_cpu_model(model, sizeof model);
  zz_peak p[2];
  zz_peak_measure(1, secs, &p[0]);
  int rows = all > 1 ? 2 : 1;
  if (rows == 2) zz_peak_measure(all, secs, &p[1]);
  printf("CPU: %s\n", model);
  printf("f32: %s | bf16: %s | int8: %s | AMX: %s\n\n", p[0].f32_isa, p[0].bf16_isa, p[0].int8_isa, p[0].amx);
  printf(
      "| threads | f32 FMA GFLOP/s | bf16 dot GFLOP/s | int8 dot GOP/s | AMX bf16 GFLOP/s | AMX int8 GOP/s | read GB/s |\n");
  printf("|---|---|---|---|---|---|---|\n");
  for (int r = 0; r < rows; r++)
    printf("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", p[r].threads, p[r].f32, p[r].bf16, p[r].int8,
           p[r].amx_bf16, p[r].amx_int8, p[r].read_gbs);
  return 0;
}
