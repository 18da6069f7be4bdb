/*
 * chat_render.c — a chat template's statements run as jinja2 runs them: text and
 * {{ }} into the output, if, for (its own scope per turn, the loop variable, an if
 * filter, else, break and continue), set (a for body's set stays in it, as jinja2
 * scopes it; ns.attr reaches out), macro and call, filter blocks, generation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"

typedef enum { ZZ_CJ_GO, ZZ_CJ_BREAK, ZZ_CJ_CONTINUE } zz_cj_flow;

static bool zz_cj_run(zz_cj *c, zz_cj_scope *s, const zz_cj_node *nd, zz_cj_buf *o, zz_cj_flow *flow);

/* names = v: one name, or a list / tuple of as many */
static bool zz_cj_assign(zz_cj *c, zz_cj_scope *s, const zz_cj_node *nd, const zz_cj_val *v) {
  if (nd->nnames == 1) return zz_cj_scope_set(c, s, nd->names[0], *v);
  zz_cj_list *l;
  if (v->k != ZZ_CJ_LIST && v->k != ZZ_CJ_STR)
    return zz_cj_fail(c, nd->at, "unpacking a %s into %d names", zz_cj_kind_name(v->k), nd->nnames);
  if (!zz_cj_iterate(c, v, nd->at, &l)) return false;
  if (l->n != (size_t)nd->nnames) return zz_cj_fail(c, nd->at, "unpacking %zu values into %d names", l->n, nd->nnames);
  for (int i = 0; i < nd->nnames; i++)
    if (!zz_cj_scope_set(c, s, nd->names[i], l->v[i])) return false;
  return true;
}

static bool zz_cj_run_for(zz_cj *c, zz_cj_scope *s, const zz_cj_node *nd, zz_cj_buf *o) {
  zz_cj_val v;
  zz_cj_list *all;
  if (!zz_cj_eval(c, s, nd->e, &v) || !zz_cj_iterate(c, &v, nd->at, &all)) return false;
  zz_cj_list *items = all;
  if (nd->cond) { /* {% for x in xs if c %}: loop.* counts what passes */
    zz_cj_val l = zz_cj_new_list(c, 0);
    if (l.k != ZZ_CJ_LIST) return false;
    items = l.l;
    for (size_t i = 0; i < all->n; i++) {
      zz_cj_scope probe = {.up = s};
      zz_cj_val keep;
      if (!zz_cj_step(c, nd->at, 1) || !zz_cj_assign(c, &probe, nd, &all->v[i]) ||
          !zz_cj_eval(c, &probe, nd->cond, &keep))
        return false;
      if (zz_cj_truthy(&keep) && !zz_cj_list_push(c, items, all->v[i])) return false;
    }
  }
  zz_cj_loop *lp = zz_cj_alloc(c, sizeof *lp);
  if (!lp) return false;
  lp->items = items;
  for (size_t i = 0; i < items->n; i++) {
    zz_cj_scope inner = {.up = s}; /* a set inside the loop stays inside it */
    zz_cj_flow flow = ZZ_CJ_GO;
    lp->i = i;
    if (!zz_cj_step(c, nd->at, 1) || !zz_cj_assign(c, &inner, nd, &items->v[i]) ||
        !zz_cj_scope_set(c, &inner, "loop", (zz_cj_val){.k = ZZ_CJ_LOOP, .lp = lp}) ||
        !zz_cj_run(c, &inner, nd->body, o, &flow))
      return false;
    if (flow == ZZ_CJ_BREAK) break;
  }
  if (items->n == 0) {
    zz_cj_flow flow = ZZ_CJ_GO;
    return zz_cj_run(c, s, nd->other, o, &flow);
  }
  return true;
}

static bool zz_cj_run_set(zz_cj *c, zz_cj_scope *s, const zz_cj_node *nd) {
  zz_cj_val v;
  if (!zz_cj_eval(c, s, nd->e, &v)) return false;
  if (!nd->attr) return zz_cj_assign(c, s, nd, &v);
  zz_cj_val ns;
  if (!zz_cj_scope_get(s, nd->names[0], &ns) || ns.k != ZZ_CJ_NS)
    return zz_cj_fail(c, nd->at, "{%% set %s.%s %%}: %s is not a namespace()", nd->names[0], nd->attr, nd->names[0]);
  if (nd->attr[0] == '_')
    return zz_cj_fail(c, nd->at, "a namespace attribute starting with '_' (transformers refuses it)");
  return zz_cj_dict_set(c, ns.d, zz_cj_cstr(nd->attr), v);
}

static bool zz_cj_run(zz_cj *c, zz_cj_scope *s, const zz_cj_node *nd, zz_cj_buf *o, zz_cj_flow *flow) {
  for (; nd && *flow == ZZ_CJ_GO; nd = nd->next) {
    zz_cj_val v, t;
    switch (nd->k) {
      case ZZ_CJ_N_TEXT:
        if (!zz_cj_buf_put(c, o, nd->text, nd->n)) return false;
        break;
      case ZZ_CJ_N_OUT:
        if (!zz_cj_eval(c, s, nd->e, &v) || !zz_cj_to_str(c, &v, false, nd->at, &t) || !zz_cj_buf_put(c, o, t.s, t.n))
          return false;
        break;
      case ZZ_CJ_N_IF:
        if (!zz_cj_eval(c, s, nd->e, &v) || !zz_cj_run(c, s, zz_cj_truthy(&v) ? nd->body : nd->other, o, flow))
          return false;
        break;
      case ZZ_CJ_N_FOR:
        if (!zz_cj_run_for(c, s, nd, o)) return false;
        break;
      case ZZ_CJ_N_SET:
        if (!zz_cj_run_set(c, s, nd)) return false;
        break;
      case ZZ_CJ_N_SETBLOCK: {
        zz_cj_buf b = {.limit = c->lim.max_output};
        zz_cj_flow f = ZZ_CJ_GO;
        if (!zz_cj_buf_put(c, &b, "", 0) || !zz_cj_run(c, s, nd->body, &b, &f) ||
            !zz_cj_scope_set(c, s, nd->names[0], zz_cj_str(b.s, b.n)))
          return false;
        break;
      }
      case ZZ_CJ_N_MACRO: {
        zz_cj_macro *m = zz_cj_alloc(c, sizeof *m);
        if (!m) return false;
        m->def = nd, m->scope = s;
        if (!zz_cj_scope_set(c, s, nd->names[0], (zz_cj_val){.k = ZZ_CJ_MACRO, .m = m})) return false;
        break;
      }
      case ZZ_CJ_N_CALL: { /* the macro called with caller() rendering the body */
        const zz_cj_expr *call = nd->e;
        zz_cj_val fn;
        if (!zz_cj_eval(c, s, call->a, &fn)) return false;
        if (fn.k != ZZ_CJ_MACRO)
          return zz_cj_fail(c, nd->at, "{%% call %%} of a %s, not a macro", zz_cj_kind_name(fn.k));
        zz_cj_macro *m = zz_cj_alloc(c, sizeof *m);
        zz_cj_val *args = zz_cj_alloc(c, (size_t)(call->nargs + 1) * sizeof *args);
        if (!m || !args) return false;
        *m = *fn.m;
        m->caller_body = nd->body, m->caller_scope = s;
        for (int i = 0; i < call->nargs; i++)
          if (!zz_cj_eval(c, s, call->args[i], &args[i])) return false;
        zz_cj_val mv = {.k = ZZ_CJ_MACRO, .m = m};
        if (!zz_cj_call_macro(c, &mv, args, call->kw, call->nargs, nd->at, &v) || !zz_cj_buf_put(c, o, v.s, v.n))
          return false;
        break;
      }
      case ZZ_CJ_N_FILTER: {
        zz_cj_buf b = {.limit = c->lim.max_output};
        zz_cj_scope inner = {.up = s};
        zz_cj_flow f = ZZ_CJ_GO;
        if (!zz_cj_buf_put(c, &b, "", 0) || !zz_cj_run(c, s, nd->body, &b, &f) ||
            !zz_cj_scope_set(c, &inner, nd->e->a ? "__zz_filter_body__" : "", zz_cj_str(b.s, b.n)) ||
            !zz_cj_eval(c, &inner, nd->e, &v) || !zz_cj_to_str(c, &v, false, nd->at, &t) ||
            !zz_cj_buf_put(c, o, t.s, t.n))
          return false;
        break;
      }
      case ZZ_CJ_N_BLOCK:
        if (!zz_cj_run(c, s, nd->body, o, flow)) return false;
        break;
      case ZZ_CJ_N_BREAK: *flow = ZZ_CJ_BREAK; break;
      case ZZ_CJ_N_CONTINUE: *flow = ZZ_CJ_CONTINUE; break;
    }
  }
  return !c->err[0];
}

bool zz_cj_render(zz_cj *c, zz_cj_scope *s, const zz_cj_node *nd, zz_cj_buf *o) {
  zz_cj_flow flow = ZZ_CJ_GO;
  return zz_cj_run(c, s, nd, o, &flow);
}
