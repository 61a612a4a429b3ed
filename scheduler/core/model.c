/*
 * model.c - the model table: each model name interned once, found through a hash map, and
 * handed out as a handle (sched_model_t) that every other call takes instead of the name.
 *
 * Invariants:
 *   1. One entry per name in use or referenced: a name is found by one hash lookup (two XXH64
 *      of the name as the map key, names under one key chained and compared), never by a scan.
 *   2. A model is in use while it holds shapes or workers (what the daemon's model limit
 *      counts); it stays alive while it is in use or referenced (sched_model_open). A handle is
 *      valid while the model is alive.
 *   3. An entry neither in use nor referenced is referenced by no shape key, worker or batch,
 *      so the next new name takes its place (and its index): registering and leaving under
 *      made-up names cannot grow the table. The place keeps nothing of the last name's
 *      measurements: its arrival gaps, its load and burst sums and its budget state start over.
 *   4. s->models[i]->index == i, and the shape key (signature, index) names one shape of one
 *      model.
 *
 * Rejected: a linear strcmp over the models per lookup (a daemon looked the name up about seven
 * times per item); a 128-bit hash as the identity without comparing the names (two names under
 * one key would share a queue).
 */
#include "scheduler/core/sched_int.h"

#include "common/invariant.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static map_key_t model_key(const char *name)
{
    size_t n = strlen(name);
    return (map_key_t){XXH64(name, n, 0), XXH64(name, n, 1)};
}

sched_model_t *model_find(const struct sched *s, const char *name)
{
    for (sched_model_t *m = map_get(&s->model_names, model_key(name)); m != NULL;
         m = m->next_same_key) {
        if (strcmp(m->name, name) == 0)
            return m;
    }
    return NULL;
}

int model_in_use(const sched_model_t *m)
{
    return m->n_shapes != 0 || m->n_workers != 0;
}

/* Puts m (named) under its key: at the head of the names sharing it. The map has room. */
static void model_name_put(struct sched *s, sched_model_t *m)
{
    map_key_t key = model_key(m->name);
    void *head = NULL;
    map_del(&s->model_names, key, &head);
    m->next_same_key = head;
    map_put(&s->model_names, key, m);
}

/* Takes m off its key (its name is about to change or the table goes). */
static void model_name_del(struct sched *s, sched_model_t *m)
{
    map_key_t key = model_key(m->name);
    sched_model_t *head = map_get(&s->model_names, key);
    if (head == m) {
        map_del(&s->model_names, key, NULL);
        if (m->next_same_key != NULL)
            map_put(&s->model_names, key, m->next_same_key);
    } else {
        while (head != NULL && head->next_same_key != m)
            head = head->next_same_key;
        if (head != NULL)
            head->next_same_key = m->next_same_key;
    }
    m->next_same_key = NULL;
}

sched_status_t model_intern(struct sched *s, const char *name, sched_model_t **out)
{
    sched_model_t *m = model_find(s, name);
    if (m != NULL) {
        *out = m;
        return SCHED_OK;
    }
    if (map_reserve(&s->model_names, 1) != MAP_OK)
        return SCHED_ENOMEM;
    char *copy = strdup(name);
    if (copy == NULL)
        return SCHED_ENOMEM;
    for (size_t i = 0; i < s->n_models; i++) { /* invariant 3 */
        m = s->models[i];
        if (model_in_use(m) || m->refs != 0)
            continue;
        model_name_del(s, m);
        free(m->name);
        m->name = copy;
        m->current = NULL;
        memset(&m->gaps, 0, sizeof(m->gaps));
        hold_model_init(m);
        model_name_put(s, m);
        budget_model_init(s, m);
        *out = m;
        return SCHED_OK;
    }
    m = calloc(1, sizeof(*m));
    sched_model_t **models = realloc(s->models, (s->n_models + 1) * sizeof(*models));
    if (models != NULL)
        s->models = models;
    if (m == NULL || models == NULL) {
        free(m);
        free(copy);
        return SCHED_ENOMEM;
    }
    m->name = copy;
    m->index = (uint32_t)s->n_models;
    s->models[s->n_models++] = m;
    model_name_put(s, m);
    budget_model_init(s, m);
    *out = m;
    return SCHED_OK;
}

void model_destroy_all(struct sched *s)
{
    for (size_t i = 0; i < s->n_models; i++) {
        free(s->models[i]->name);
        free(s->models[i]);
    }
    free(s->models);
    map_fini(&s->model_names);
}

sched_status_t sched_model_open(sched_t *s, const char *name, sched_model_t **out)
{
    if (s == NULL || name == NULL || name[0] == '\0' || out == NULL)
        return SCHED_EINVAL;
    sched_model_t *m;
    sched_status_t st = model_intern(s, name, &m);
    if (st != SCHED_OK)
        return st;
    m->refs++;
    *out = m;
    return SCHED_OK;
}

void sched_model_close(sched_t *s, sched_model_t *m)
{
    (void)s;
    if (m != NULL && m->refs != 0)
        m->refs--;
}

sched_model_t *sched_model_find(const sched_t *s, const char *name)
{
    return name != NULL ? model_find(s, name) : NULL;
}

const char *sched_model_name(const sched_model_t *m)
{
    return m->name;
}

int sched_model_in_use(const sched_model_t *m)
{
    return m != NULL && model_in_use(m);
}

size_t sched_model_count(const sched_t *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_models; i++)
        n += model_in_use(s->models[i]);
    return n;
}

int model_check(const struct sched *s)
{
    size_t named = 0;
    for (size_t i = 0; i < s->n_models; i++) {
        const sched_model_t *m = s->models[i];
        INVARIANT_HOLDS(m->index == i, "model %s at %zu says %u", m->name, i, m->index);
        INVARIANT_HOLDS(model_find(s, m->name) == m, "model %s is not found by its name", m->name);
        for (const sched_model_t *k = map_get(&s->model_names, model_key(m->name)); k != NULL;
             k = k->next_same_key)
            named += k == m;
    }
    INVARIANT_HOLDS(named == s->n_models, "%zu models, %zu under their names", s->n_models, named);
    return 1;
}
