/*
 * zz_launch.h — the command line of zigzag: the options table (every option and
 * tunable with its environment variable, default and meaning, printed by
 * `zigzag --help`), the job-file bookkeeping of `generate` (--resume, the
 * progress line, committing each finished block) and `bench`.
 *
 * Usage:
 *     zz_opts o;  zz_opts_defaults(&o);
 *     if (zz_opts_parse(argc, argv, &o) == 0) ... o.command ...
 *
 * This header only gathers the module's headers, one per concern (listed below);
 * a file that needs one concern includes that header alone.
 */
#ifndef ZZ_LAUNCH_H
#define ZZ_LAUNCH_H

#include "zz_opts.h"     /* the options table and what it builds */
#include "zz_jobfile.h"  /* --resume, the output file, progress, a job's prompts */
#include "zz_commands.h" /* the model, the run, the commands */

#endif /* ZZ_LAUNCH_H */
