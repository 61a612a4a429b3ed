/*
 * harness_stats.c - lanes.stats for the daemon integration tests: the document, and the counters
 * and sums the tests assert on, read with jansson. See harness.h.
 *
 * Invariant: a document that is not a JSON object fails the test; a missing counter fails it
 * too (h_counter), except the rejections, which the daemon only lists when nonzero.
 */
#include "tests/integration/harness.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lanes.stats ----------------------------------------------------------------------------- */

char *h_stats(natsConnection *nc)
{
    char subject[64];
    h_subject(subject, sizeof(subject), "stats", NULL);
    natsMsg *m = NULL;
    natsStatus s = h_request(nc, subject, "", 0, 5000, &m);
    H_REQUIRE(s == NATS_OK, "request %s: %s", subject, natsStatus_GetText(s));
    int len = natsMsg_GetDataLength(m);
    char *out = malloc((size_t)len + 1);
    H_REQUIRE(out != NULL, "out of memory");
    memcpy(out, natsMsg_GetData(m), (size_t)len);
    out[len] = '\0';
    natsMsg_Destroy(m);
    H_REQUIRE(len > 0 && out[0] == '{', "stats reply is not a JSON object: '%.200s'", out);
    return out;
}

/* The stats document as a JSON object (json_decref); the test fails when it is not one. */
static json_t *stats_parse(const char *json)
{
    json_error_t e;
    json_t *root = json_loads(json, 0, &e);
    H_REQUIRE(root != NULL, "stats are not JSON (line %d: %s): %.200s", e.line, e.text, json);
    if (!json_is_object(root)) {
        json_decref(root);
        H_REQUIRE(0, "stats are not a JSON object: %.200s", json);
    }
    return root;
}

static bool json_int64_get(const json_t *v, int64_t *out)
{
    if (json_is_integer(v))
        *out = (int64_t)json_integer_value(v);
    else if (json_is_real(v))
        *out = (int64_t)json_real_value(v);
    else
        return false;
    return true;
}

bool h_json_path(const char *json, const char *path, int64_t *out)
{
    json_t *root = stats_parse(json);
    const json_t *v = root;
    char key[128];
    const char *k = path;
    bool found = false;
    for (;;) {
        const char *dot = strchr(k, '.');
        size_t n = dot != NULL ? (size_t)(dot - k) : strlen(k);
        if (n >= sizeof(key) || !json_is_object(v))
            break;
        memcpy(key, k, n);
        key[n] = '\0';
        if ((v = json_object_get(v, key)) == NULL)
            break;
        if (dot == NULL) {
            found = json_int64_get(v, out);
            break;
        }
        k = dot + 1;
    }
    json_decref(root);
    return found;
}

int64_t h_counter(const char *json, const char *name)
{
    char path[160];
    snprintf(path, sizeof(path), "counters.%s", name);
    int64_t v = 0;
    H_REQUIRE(h_json_path(json, path, &v), "stats have no numeric %s: %s", path, json);
    return v;
}

int64_t h_rejected(const char *json, const char *reason)
{
    char path[160];
    snprintf(path, sizeof(path), "counters.rejected.%s", reason);
    int64_t v = 0;
    return h_json_path(json, path, &v) ? v : 0;
}

/* Every member named key at any depth of v: their count, and the sum of the numeric ones. */
static void json_key_visit(const json_t *v, const char *key, int64_t *sum, size_t *count)
{
    if (json_is_object(v)) {
        const char *name;
        const json_t *member;
        json_object_foreach((json_t *)v, name, member)
        {
            int64_t n = 0;
            if (strcmp(name, key) == 0) {
                (*count)++;
                if (json_int64_get(member, &n))
                    *sum += n;
            }
            json_key_visit(member, key, sum, count);
        }
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *item;
        json_array_foreach(v, i, item) json_key_visit(item, key, sum, count);
    }
}

int64_t h_json_sum(const char *json, const char *key)
{
    json_t *root = stats_parse(json);
    int64_t sum = 0;
    size_t count = 0;
    json_key_visit(root, key, &sum, &count);
    json_decref(root);
    return sum;
}

size_t h_json_count(const char *json, const char *key)
{
    json_t *root = stats_parse(json);
    int64_t sum = 0;
    size_t count = 0;
    json_key_visit(root, key, &sum, &count);
    json_decref(root);
    return count;
}
