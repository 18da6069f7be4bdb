/*
 * hub.c — a model named as on the Hugging Face hub ("org/name") found in the local
 * cache that huggingface_hub fills (and transformers and vLLM read), offline: no
 * network, no download. The cache: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE,
 * else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub (huggingface_hub's constants.py); a model's files in
 * models--org--name/snapshots/<commit>/, the commit of the main branch in
 * models--org--name/refs/main.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "zz_model.h"

static bool zz_is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The hub cache directory into out; false when no variable names a home. */
static bool zz_hub_cache(char *out, size_t len) {
  const char *v;
  if ((v = getenv("HF_HUB_CACHE")) && *v) snprintf(out, len, "%s", v);
  else if ((v = getenv("HUGGINGFACE_HUB_CACHE")) && *v)
    snprintf(out, len, "%s", v);
  else if ((v = getenv("HF_HOME")) && *v)
    snprintf(out, len, "%s/hub", v);
  else if ((v = getenv("XDG_CACHE_HOME")) && *v)
    snprintf(out, len, "%s/huggingface/hub", v);
  else if ((v = getenv("HOME")) && *v)
    snprintf(out, len, "%s/.cache/huggingface/hub", v);
  else
    return false;
  return true;
}

/* "org/name": one slash, neither part empty, no "." or ".." part (a path, not a repo id). */
static bool zz_is_repo_id(const char *s) {
  const char *slash = strchr(s, '/');
  if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/')) return false;
  return strncmp(s, "./", 2) != 0 && strncmp(s, "../", 3) != 0 && strcmp(slash + 1, ".") != 0 &&
         strcmp(slash + 1, "..") != 0;
}

zz_status zz_model_locate(const char *model, char *dir, size_t len) {
  if (!model || !*model) return zz_error(ZZ_ERR_INVALID_ARG, "--model is empty");
  if (strlen(model) >= len) return zz_error(ZZ_ERR_INVALID_ARG, "--model %.64s...: name too long", model);
  snprintf(dir, len, "%s", model);
  if (zz_is_dir(model) || !zz_is_repo_id(model)) return ZZ_OK; /* a directory, or a preset (zz_config_resolve) */
  char hub[4096], repo[4600], ref[4700], snap[4800];
  if (!zz_hub_cache(hub, sizeof hub)) snprintf(hub, sizeof hub, "(no HF_HUB_CACHE, HF_HOME or HOME)");
  const char *slash = strchr(model, '/');
  snprintf(repo, sizeof repo, "%s/models--%.*s--%s", hub, (int)(slash - model), model, slash + 1);
  snprintf(ref, sizeof ref, "%s/refs/main", repo);
  char commit[128] = "";
  FILE *f = fopen(ref, "r");
  if (f) {
    if (!fgets(commit, sizeof commit, f)) commit[0] = 0;
    fclose(f);
    commit[strcspn(commit, " \t\r\n")] = 0;
  }
  bool ok_commit = commit[0] && !strchr(commit, '/') && strcmp(commit, ".") != 0 && strcmp(commit, "..") != 0;
  snprintf(snap, sizeof snap, "%s/snapshots/%s", repo, commit);
  if (ok_commit && zz_is_dir(snap)) {
    if (strlen(snap) >= len) return zz_error(ZZ_ERR_INVALID_ARG, "--model %s: cache path too long", model);
    snprintf(dir, len, "%s", snap);
    return ZZ_OK;
  }
  zz_config c; /* a preset spelled as on the hub ("Qwen/Qwen2.5-72B") needs no files */
  if (zz_config_preset(model, &c) == ZZ_OK) return ZZ_OK;
  if (!f)
    return zz_error(ZZ_ERR_IO,
                    "--model %s: no such directory, not a preset, and not in the Hugging Face cache (looked for %s; "
                    "the cache is $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub; zigzag does not "
                    "download)",
                    model, ref);
  return zz_error(ZZ_ERR_IO, "--model %s: %s names commit \"%s\", but %s is not a directory", model, ref, commit, snap);
}
