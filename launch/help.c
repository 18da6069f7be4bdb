/*
 * help.c — what the command line says about itself, all made from the one options
 * table (options.c, zz_opt_row): `zigzag CMD --help` (that command's usage and its
 * options only), `zigzag --version`, and the two files `cmake --install` puts beside
 * the program: the man page (`zigzag man`, roff) and the bash completion
 * (`zigzag completion`). A new option appears in all of them by its table row.
 */
#include <stdio.h>
#include <string.h>

#include "zz_launch.h"

#ifndef ZZ_VERSION
#define ZZ_VERSION "unknown"
#endif

/* Each command's usage line and what it does. */
static const struct {
  const char *cmd, *usage, *what;
} zz_cmd_usage[] = {
    {"generate", "zigzag generate --model DIR|PRESET [--dummy] --prompts FILE|- --out FILE|- [--max-new-tokens N]",
     "generate for every line of a JSON Lines file: native lines ({\"id\", \"prompt\" | \"input_ids\"} with their own "
     "max_new_tokens, temperature, top_p, top_k, seed, stop, repetition_penalty, presence_penalty, frequency_penalty, n, "
     "logprobs) or OpenAI batch request lines (/v1/completions, /v1/chat/completions), answered line by line"},
    {"bench", "zigzag bench --model PRESET --dummy [--prompt-len S] [--gen-len N] [--json]",
     "throughput of one policy on random weights (prefill, decode, total tokens/s)"},
    {"plan", "zigzag plan --model M [--prompt-len S] [--gen-len N] [--hw FILE] [--ranks m] [--json]",
     "the policy the planner chooses and its predicted throughput"},
    {"profile", "zigzag profile [--out FILE]", "measure this machine: a hardware file for plan --hw"},
    {"perplexity", "zigzag perplexity --model DIR --text FILE [--window N] [policy flags]",
     "held-out perplexity of a model under a policy"},
    {"tokenize", "zigzag tokenize --model DIR [--] TEXT", "the token ids of TEXT"},
    {"chat-template", "zigzag chat-template --model DIR --messages FILE [--tools FILE] [--no-generation-prompt]",
     "the text the model's chat template (chat_template.jinja or tokenizer_config.json) renders for the messages, with the generation prompt"},
};
#define ZZ_N_USAGE (sizeof zz_cmd_usage / sizeof zz_cmd_usage[0])

void zz_print_version(FILE *f) {
  fprintf(f, "zigzag %s (%s CUDA)\n", ZZ_VERSION,
#ifdef ZZ_HAVE_CUDA
          "with"
#else
          "without"
#endif
  );
}

static int zz_cmd_bit(const char *cmd) {
  const char *const *names = zz_opt_commands();
  for (int c = 0; names[c]; c++)
    if (strcmp(names[c], cmd) == 0) return c;
  return -1;
}

static void zz_print_option(FILE *f, const zz_opt_info *r) {
  char left[64];
  if (r->flag) snprintf(left, sizeof left, "--%s%s", r->flag, r->takes_value ? " X" : "");
  else
    snprintf(left, sizeof left, "%s=X", r->env);
  fprintf(f, "  %-24s %s", left, r->help);
  if (r->range[0]) fprintf(f, "; %s", r->range);
  if (r->def) fprintf(f, " (default %s)", r->def);
  if (r->env && r->flag) fprintf(f, " [%s]", r->env);
  if (r->mpirun) fprintf(f, " {under mpirun}");
  fprintf(f, "\n");
}

bool zz_opts_help_command(FILE *f, const char *cmd) {
  int c = cmd ? zz_cmd_bit(cmd) : -1;
  if (c < 0) {
    zz_opts_help(f);
    if (cmd) fprintf(stderr, "zigzag: no command '%s'; the whole page is above\n", cmd);
    return cmd == NULL;
  }
  for (size_t u = 0; u < ZZ_N_USAGE; u++)
    if (strcmp(zz_cmd_usage[u].cmd, cmd) == 0)
      fprintf(f, "usage: %s\n\n%s\n\noptions of %s (environment variable in brackets sets the default):\n",
              zz_cmd_usage[u].usage, zz_cmd_usage[u].what, cmd);
  zz_opt_info r;
  for (size_t i = 0; zz_opt_row(i, &r); i++)
    if (r.flag && (r.cmds & (1u << c))) zz_print_option(f, &r);
  return true;
}

/* roff: a backslash is \e, a line starting with . or ' is escaped with \& */
static void zz_roff(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '\\') fputs("\\e", f);
    else if (*s == '-')
      fputs("\\-", f);
    else
      fputc(*s, f);
  }
}

void zz_print_man(FILE *f) {
  fprintf(f,
          ".TH ZIGZAG 1 \"\" \"zigzag %s\" \"User Commands\"\n.SH NAME\nzigzag \\- high-throughput batch generation "
          "with offloading\n.SH SYNOPSIS\n",
          ZZ_VERSION);
  for (size_t u = 0; u < ZZ_N_USAGE; u++) {
    fputs(".PP\n\\fB", f);
    zz_roff(f, zz_cmd_usage[u].usage);
    fputs("\\fR\n", f);
  }
  fputs(".PP\n\\fBmpirun \\-np\\fR M \\fBzigzag generate\\fR|\\fBbench\\fR ... (a pipeline of M ranks)\n"
        ".SH COMMANDS\n",
        f);
  for (size_t u = 0; u < ZZ_N_USAGE; u++) {
    fprintf(f, ".TP\n\\fB%s\\fR\n", zz_cmd_usage[u].cmd);
    zz_roff(f, zz_cmd_usage[u].what);
    fputs("\n", f);
  }
  fputs(".SH OPTIONS\nAn environment variable in brackets sets the default; an option given to a command it does "
        "not apply to is refused.\n",
        f);
  const char *const *names = zz_opt_commands();
  zz_opt_info r;
  for (size_t i = 0; zz_opt_row(i, &r); i++) {
    fputs(".TP\n", f);
    if (r.flag) {
      fputs("\\fB\\-\\-", f);
      zz_roff(f, r.flag);
      fputs(r.takes_value ? "\\fR \\fIX\\fR\n" : "\\fR\n", f);
    } else {
      fprintf(f, "\\fB%s\\fR=\\fIX\\fR\n", r.env);
    }
    zz_roff(f, r.help);
    if (r.range[0]) {
      fputs("; ", f);
      zz_roff(f, r.range);
    }
    if (r.def) {
      fputs(" (default ", f);
      zz_roff(f, r.def);
      fputs(")", f);
    }
    if (r.env && r.flag) fprintf(f, " [%s]", r.env);
    fputs(". Commands:", f);
    for (int c = 0; names[c]; c++)
      if (r.cmds & (1u << c)) fprintf(f, " %s", names[c]);
    fputs(r.mpirun ? " (under mpirun)\n" : "\n", f);
  }
  fputs(".SH SEE ALSO\nThe docs/ folder of the source tree: docs/from-vllm-transformers.md maps vLLM's and "
        "transformers' options to zigzag's.\n",
        f);
}

void zz_print_bash_completion(FILE *f) {
  const char *const *names = zz_opt_commands();
  fputs("# bash completion for zigzag, made by `zigzag completion` from its options table\n"
        "_zigzag() {\n  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd= w\n"
        "  for w in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do case $w in -*) ;; *) cmd=$w; break ;; esac; done\n"
        "  case $prev in\n",
        f);
  zz_opt_info r;
  for (size_t i = 0; zz_opt_row(i, &r); i++)
    if (r.flag && r.choices)
      fprintf(f, "    --%s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;\n", r.flag, r.choices);
  fputs("    --model|--prompts|--out|--text|--hw|--offload-dir|--messages) COMPREPLY=($(compgen -f -- \"$cur\")); "
        "return ;;\n  esac\n  case $cmd in\n    '') COMPREPLY=($(compgen -W \"",
        f);
  for (int c = 0; names[c]; c++) fprintf(f, "%s ", names[c]);
  fputs("--help --version\" -- \"$cur\")); return ;;\n", f);
  for (int c = 0; names[c]; c++) {
    fprintf(f, "    %s) COMPREPLY=($(compgen -W \"--help", names[c]);
    for (size_t i = 0; zz_opt_row(i, &r); i++)
      if (r.flag && (r.cmds & (1u << c))) fprintf(f, " --%s", r.flag);
    fputs("\" -- \"$cur\")) ;;\n", f);
  }
  fputs("  esac\n}\ncomplete -o default -F _zigzag zigzag\n", f);
}
