/* Unit tests for lib/core/gpupolicy: decoding and every refusal, selectors, tiers, precedence
 * and the tier rules with their exact messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include <cjson/cJSON.h>

#include "gpupolicy.h"

#define MIB (1024ull * 1024)
#define GI  (1024ull * MIB)

/* JSON written with single quotes (readable in C), made double. Static buffer: one at a time. */
static char *dq(const char *s)
{
	static char buf[1 << 16];
	size_t i;

	for (i = 0; s[i] != '\0' && i + 1 < sizeof(buf); i++)
		buf[i] = s[i] == '\'' ? '"' : s[i];
	buf[i] = '\0';
	return buf;
}

/* Parse JSON text (double quotes) as a policy: the return code, *p, err. */
static int parse_json(const char *json, struct gpupolicy **p, char *err, size_t errlen)
{
	cJSON *j = cJSON_Parse(json);
	int rc;

	assert_non_null(j);
	rc = gpupolicy_parse(j, p, err, errlen);
	cJSON_Delete(j);
	return rc;
}

/* A policy named "p" with this spec (single quotes). */
static int parse_spec(const char *spec, struct gpupolicy **p, char *err, size_t errlen)
{
	char buf[1 << 16];

	snprintf(buf, sizeof(buf), "{'metadata':{'name':'p'},'spec':%s}", spec);
	return parse_json(dq(buf), p, err, errlen);
}

/* The seed's example (examples/policies/realtime-batch.yaml). */
static const char *realtime_batch =
    "{'apiVersion':'gpu-memory-guard.io/v1alpha1','kind':'GPUMemoryPolicy',"
    "'metadata':{'name':'realtime-batch','generation':3},"
    "'spec':{'tiers':["
    "{'name':'realtime','priorityClassNames':['realtime'],'maxShare':0.60},"
    "{'name':'batch','priorityClassNames':['batch'],'yield':{'tier':'realtime','above':0.80}}"
    "]}}";

static struct gpupolicy *must_parse(const char *single_quoted)
{
	struct gpupolicy *p = NULL;
	char err[GPUPOLICY_ERR_MAX];
	int rc = parse_json(dq(single_quoted), &p, err, sizeof(err));

	if (rc != 0)
		fail_msg("parse failed: %s", err);
	assert_non_null(p);
	return p;
}

/* ---- parse: the valid ---- */

static void test_parse_full(void **state)
{
	struct gpupolicy *p = must_parse(
	    "{'metadata':{'name':'split','generation':7,'uid':'x'},"
	    "'spec':{'nodeSelector':{'matchLabels':{'gpu':'h100'},'matchExpressions':["
	    "{'key':'zone','operator':'In','values':['a','b']},"
	    "{'key':'tainted','operator':'DoesNotExist'}]},"
	    "'threshold':0.85,'warnThreshold':0.7,'mode':'warn','unknown':1,"
	    "'tiers':["
	    "{'name':'batch','priorityClassNames':['batch','low'],'namespaces':['ml'],"
	    "'podSelector':{'matchExpressions':[{'key':'job','operator':'Exists','values':[]}]},"
	    "'yield':{'tier':'realtime','above':0.8}},"
	    "{'name':'realtime','namespaces':['serving'],'maxShare':0.6,'podSelector':null}"
	    "]}}");

	assert_string_equal(p->name, "split");
	assert_int_equal(p->generation, 7);
	assert_int_equal(p->node_selector.n, 3);
	assert_string_equal(p->node_selector.reqs[0].key, "gpu");
	assert_int_equal(p->node_selector.reqs[0].op, LABELSEL_IN);
	assert_int_equal(p->node_selector.reqs[0].n_values, 1);
	assert_string_equal(p->node_selector.reqs[0].values[0], "h100");
	assert_string_equal(p->node_selector.reqs[1].key, "zone");
	assert_int_equal(p->node_selector.reqs[1].n_values, 2);
	assert_string_equal(p->node_selector.reqs[1].values[1], "b");
	assert_int_equal(p->node_selector.reqs[2].op, LABELSEL_DOESNOTEXIST);
	assert_int_equal(p->node_selector.reqs[2].n_values, 0);
	assert_int_equal(p->has_threshold, 1);
	assert_true(p->threshold == 0.85);
	assert_int_equal(p->has_warn_threshold, 1);
	assert_true(p->warn_threshold == 0.7);
	assert_int_equal(p->mode, GPUPOLICY_WARN);
	assert_int_equal(p->n_tiers, 2);

	const struct gpupolicy_tier *b = &p->tiers[0], *r = &p->tiers[1];
	assert_string_equal(b->name, "batch");
	assert_int_equal(b->n_priority_classes, 2);
	assert_string_equal(b->priority_classes[1], "low");
	assert_int_equal(b->n_namespaces, 1);
	assert_string_equal(b->namespaces[0], "ml");
	assert_int_equal(b->has_pod_selector, 1);
	assert_int_equal(b->pod_selector.n, 1);
	assert_int_equal(b->pod_selector.reqs[0].op, LABELSEL_EXISTS);
	assert_int_equal(b->has_max_share, 0);
	assert_int_equal(b->yield_to, 1); /* declared after it */
	assert_true(b->yield_above == 0.8);
	assert_string_equal(r->name, "realtime");
	assert_int_equal(r->n_priority_classes, 0);
	assert_int_equal(r->has_pod_selector, 0); /* null is absent */
	assert_int_equal(r->has_max_share, 1);
	assert_true(r->max_share == 0.6);
	assert_int_equal(r->yield_to, -1);
	gpupolicy_free(p);
}

static void test_parse_defaults(void **state)
{
	struct gpupolicy *p = must_parse("{'metadata':{'name':'gpu.team-a.example'},'spec':{}}");

	assert_string_equal(p->name, "gpu.team-a.example");
	assert_int_equal(p->generation, 0);
	assert_int_equal(p->node_selector.n, 0);
	assert_int_equal(p->has_threshold, 0);
	assert_int_equal(p->has_warn_threshold, 0);
	assert_int_equal(p->mode, GPUPOLICY_ENFORCE);
	assert_int_equal(p->n_tiers, 0);
	gpupolicy_free(p);

	/* Bounds that are allowed: ratio 1, a 63-byte tier name, a 253-byte name, audit. */
	char json[2048], name[254];
	memset(name, 'a', 253);
	name[253] = '\0';
	snprintf(json, sizeof(json),
	         "{'metadata':{'name':'%s'},'spec':{'threshold':1,'mode':'audit','tiers':[{'name':"
	         "'a23456789012345678901234567890123456789012345678901234567890123',"
	         "'podSelector':{},'maxShare':1}]}}",
	         name);
	p = must_parse(json);
	assert_int_equal(strlen(p->name), 253);
	assert_int_equal(p->mode, GPUPOLICY_AUDIT);
	assert_int_equal(p->tiers[0].has_pod_selector, 1);
	assert_int_equal(p->tiers[0].pod_selector.n, 0);
	gpupolicy_free(p);
	gpupolicy_free(NULL);
	assert_string_equal(gpupolicy_mode_name(GPUPOLICY_ENFORCE), "enforce");
	assert_string_equal(gpupolicy_mode_name(GPUPOLICY_WARN), "warn");
	assert_string_equal(gpupolicy_mode_name(GPUPOLICY_AUDIT), "audit");
}

/* ---- parse: every refusal (the CRD's schema and CEL say the same) ---- */

struct refusal {
	const char *spec; /* single quotes; a whole object when it starts with "!" */
	const char *err;  /* the exact error */
};

static const struct refusal refusals[] = {
    /* the object and its metadata */
    {"![]", "GPUMemoryPolicy: must be a JSON object, got an array"},
    {"!{'spec':{}}", "metadata: required, an object, got nothing"},
    {"!{'metadata':{},'spec':{}}", "metadata.name: required, a non-empty string, got nothing"},
    {"!{'metadata':{'name':''},'spec':{}}",
     "metadata.name: required, a non-empty string, got \"\""},
    {"!{'metadata':{'name':7},'spec':{}}", "metadata.name: required, a non-empty string, got 7"},
    {"!{'metadata':{'name':'Split 60%'},'spec':{}}",
     "metadata.name: must be a DNS subdomain (a-z, 0-9, - and ., starting and ending with a "
     "letter or digit), got \"Split 60%\""},
    {"!{'metadata':{'name':'a..b'},'spec':{}}", "metadata.name: must be a DNS subdomain"},
    {"!{'metadata':{'name':'a.-b'},'spec':{}}", "metadata.name: must be a DNS subdomain"},
    {"!{'metadata':{'name':'-a'},'spec':{}}", "metadata.name: must be a DNS subdomain"},
    {"!{'metadata':{'name':'a.'},'spec':{}}", "metadata.name: must be a DNS subdomain"},
    {"!{'metadata':{'name':'p','generation':-1},'spec':{}}",
     "metadata.generation: must be an integer >= 0, got -1"},
    {"!{'metadata':{'name':'p','generation':1.5},'spec':{}}",
     "metadata.generation: must be an integer >= 0, got 1.5"},
    {"!{'metadata':{'name':'p','generation':'3'},'spec':{}}",
     "metadata.generation: must be an integer >= 0, got \"3\""},
    {"!{'metadata':{'name':'p'}}", "spec: required, an object, got nothing"},
    {"!{'metadata':{'name':'p'},'spec':[]}", "spec: required, an object, got an array"},
    /* nodeSelector */
    {"{'nodeSelector':'gpu'}", "spec.nodeSelector: must be an object, got \"gpu\""},
    {"{'nodeSelector':{'matchLabels':['a']}}",
     "spec.nodeSelector.matchLabels: must be an object, got an array"},
    {"{'nodeSelector':{'matchLabels':{'gpu':1}}}",
     "spec.nodeSelector.matchLabels.gpu: must be a string, got 1"},
    {"{'nodeSelector':{'matchLabels':{'':'x'}}}",
     "spec.nodeSelector.matchLabels: a key must not be empty"},
    {"{'nodeSelector':{'matchExpressions':{}}}",
     "spec.nodeSelector.matchExpressions: must be an array, got an object"},
    {"{'nodeSelector':{'matchExpressions':['zone']}}",
     "spec.nodeSelector.matchExpressions[0]: must be an object, got \"zone\""},
    {"{'nodeSelector':{'matchExpressions':[{'operator':'Exists'}]}}",
     "spec.nodeSelector.matchExpressions[0].key: must be a non-empty string, got nothing"},
    {"{'nodeSelector':{'matchExpressions':[{'key':'a','operator':'Exists'},"
     "{'key':'z','operator':'Gt','values':['1']}]}}",
     "spec.nodeSelector.matchExpressions[1].operator: must be one of In, NotIn, Exists, "
     "DoesNotExist, got \"Gt\""},
    {"{'nodeSelector':{'matchExpressions':[{'key':'z','operator':'in','values':['a']}]}}",
     "spec.nodeSelector.matchExpressions[0].operator: must be one of In, NotIn, Exists, "
     "DoesNotExist, got \"in\""},
    {"{'nodeSelector':{'matchExpressions':[{'key':'z','operator':'In'}]}}",
     "spec.nodeSelector.matchExpressions[0].values: must have at least one value for In"},
    {"{'nodeSelector':{'matchExpressions':[{'key':'z','operator':'NotIn','values':[]}]}}",
     "spec.nodeSelector.matchExpressions[0].values: must have at least one value for NotIn"},
    {"{'nodeSelector':{'matchExpressions':[{'key':'z','operator':'Exists','values':['a']}]}}",
     "spec.nodeSelector.matchExpressions[0].values: must be empty for Exists"},
    {"{'nodeSelector':{'matchExpressions':[{'key':'z','operator':'DoesNotExist',"
     "'values':['a']}]}}",
     "spec.nodeSelector.matchExpressions[0].values: must be empty for DoesNotExist"},
    {"{'nodeSelector':{'matchExpressions':[{'key':'z','operator':'In','values':'a'}]}}",
     "spec.nodeSelector.matchExpressions[0].values: must be an array of strings, got \"a\""},
    {"{'nodeSelector':{'matchExpressions':[{'key':'z','operator':'In','values':['a',5]}]}}",
     "spec.nodeSelector.matchExpressions[0].values[1]: must be a string, got 5"},
    /* threshold, warnThreshold, mode */
    {"{'threshold':0}", "spec.threshold: must be a number in (0, 1], got 0"},
    {"{'threshold':1.5}", "spec.threshold: must be a number in (0, 1], got 1.5"},
    {"{'threshold':-0.5}", "spec.threshold: must be a number in (0, 1], got -0.5"},
    {"{'threshold':true}", "spec.threshold: must be a number in (0, 1], got true"},
    {"{'threshold':'0.9'}", "spec.threshold: must be a number in (0, 1], got \"0.9\""},
    {"{'warnThreshold':1.01}", "spec.warnThreshold: must be a number in (0, 1], got 1.01"},
    {"{'warnThreshold':false}", "spec.warnThreshold: must be a number in (0, 1], got false"},
    {"{'mode':'block'}", "spec.mode: must be one of enforce, warn, audit, got \"block\""},
    {"{'mode':'Enforce'}", "spec.mode: must be one of enforce, warn, audit, got \"Enforce\""},
    {"{'mode':1}", "spec.mode: must be one of enforce, warn, audit, got 1"},
    /* tiers */
    {"{'tiers':{}}", "spec.tiers: must be an array, got an object"},
    {"{'tiers':[1]}", "spec.tiers[0]: must be an object, got 1"},
    {"{'tiers':[{'namespaces':['a']}]}",
     "spec.tiers[0].name: must be a DNS label (1 to 63 characters of a-z, 0-9 and -, starting "
     "and ending with a letter or digit), got nothing"},
    {"{'tiers':[{'name':'Batch','namespaces':['a']}]}",
     "spec.tiers[0].name: must be a DNS label (1 to 63 characters of a-z, 0-9 and -, starting "
     "and ending with a letter or digit), got \"Batch\""},
    {"{'tiers':[{'name':'-batch','namespaces':['a']}]}", "spec.tiers[0].name: must be a DNS"},
    {"{'tiers':[{'name':'batch-','namespaces':['a']}]}", "spec.tiers[0].name: must be a DNS"},
    {"{'tiers':[{'name':'','namespaces':['a']}]}", "spec.tiers[0].name: must be a DNS"},
    {"{'tiers':[{'name':'a_b','namespaces':['a']}]}", "spec.tiers[0].name: must be a DNS"},
    {"{'tiers':[{'name':'a.b','namespaces':['a']}]}", "spec.tiers[0].name: must be a DNS"},
    {"{'tiers':[{'name':'a234567890123456789012345678901234567890123456789012345678901234',"
     "'namespaces':['a']}]}",
     "spec.tiers[0].name: must be a DNS"},
    {"{'tiers':[{'name':'batch','namespaces':['a']},{'name':'rt','namespaces':['b']},"
     "{'name':'batch','namespaces':['c']}]}",
     "spec.tiers[2].name: \"batch\" is used by tiers[0] too"},
    {"{'tiers':[{'name':'batch','maxShare':0.5}]}",
     "spec.tiers[0]: needs at least one of priorityClassNames, namespaces (non-empty) or "
     "podSelector"},
    {"{'tiers':[{'name':'batch','priorityClassNames':[],'namespaces':[]}]}",
     "spec.tiers[0]: needs at least one of"},
    {"{'tiers':[{'name':'batch','priorityClassNames':'rt'}]}",
     "spec.tiers[0].priorityClassNames: must be an array of strings, got \"rt\""},
    {"{'tiers':[{'name':'batch','priorityClassNames':['rt',3]}]}",
     "spec.tiers[0].priorityClassNames[1]: must be a non-empty string, got 3"},
    {"{'tiers':[{'name':'batch','namespaces':['ml','']}]}",
     "spec.tiers[0].namespaces[1]: must be a non-empty string, got \"\""},
    {"{'tiers':[{'name':'batch','podSelector':[]}]}",
     "spec.tiers[0].podSelector: must be an object, got an array"},
    {"{'tiers':[{'name':'batch','podSelector':{'matchExpressions':[{'key':'a',"
     "'operator':'Exists','values':['x']}]}}]}",
     "spec.tiers[0].podSelector.matchExpressions[0].values: must be empty for Exists"},
    {"{'tiers':[{'name':'rt','namespaces':['a']},{'name':'batch','namespaces':['b'],"
     "'maxShare':1.5}]}",
     "spec.tiers[1].maxShare: must be a number in (0, 1], got 1.5"},
    {"{'tiers':[{'name':'batch','namespaces':['b'],'maxShare':0}]}",
     "spec.tiers[0].maxShare: must be a number in (0, 1], got 0"},
    {"{'tiers':[{'name':'batch','namespaces':['b'],'maxShare':'60%'}]}",
     "spec.tiers[0].maxShare: must be a number in (0, 1], got \"60%\""},
    /* yield */
    {"{'tiers':[{'name':'rt','namespaces':['a'],'maxShare':0.6},"
     "{'name':'batch','namespaces':['b'],'yield':'rt'}]}",
     "spec.tiers[1].yield: must be an object {tier, above}, got \"rt\""},
    {"{'tiers':[{'name':'rt','namespaces':['a'],'maxShare':0.6},"
     "{'name':'batch','namespaces':['b'],'yield':{'above':0.8}}]}",
     "spec.tiers[1].yield.tier: must be the name of another tier, got nothing"},
    {"{'tiers':[{'name':'rt','namespaces':['a'],'maxShare':0.6},"
     "{'name':'batch','namespaces':['b'],'yield':{'tier':'rt'}}]}",
     "spec.tiers[1].yield.above: required, a number in (0, 1]"},
    {"{'tiers':[{'name':'rt','namespaces':['a'],'maxShare':0.6},"
     "{'name':'batch','namespaces':['b'],'yield':{'tier':'rt','above':0}}]}",
     "spec.tiers[1].yield.above: must be a number in (0, 1], got 0"},
    {"{'tiers':[{'name':'rt','namespaces':['a'],'maxShare':0.6},"
     "{'name':'batch','namespaces':['b'],'yield':{'tier':'rt','above':1.2}}]}",
     "spec.tiers[1].yield.above: must be a number in (0, 1], got 1.2"},
    {"{'tiers':[{'name':'rt','namespaces':['a'],'maxShare':0.6},"
     "{'name':'batch','namespaces':['b'],'yield':{'tier':'gold','above':0.8}}]}",
     "spec.tiers[1].yield.tier: \"gold\" is not a tier of this policy"},
    {"{'tiers':[{'name':'rt','namespaces':['a'],'maxShare':0.6},"
     "{'name':'batch','namespaces':['b'],'maxShare':0.3,'yield':{'tier':'batch','above':0.8}}]}",
     "spec.tiers[1].yield.tier: a tier cannot yield to itself (\"batch\")"},
    {"{'tiers':[{'name':'rt','namespaces':['a']},"
     "{'name':'batch','namespaces':['b'],'yield':{'tier':'rt','above':0.8}}]}",
     "spec.tiers[1].yield.tier: tier \"rt\" has no maxShare to yield to"},
};

static void test_refusals(void **state)
{
	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		const struct refusal *c = &refusals[i];
		struct gpupolicy *p = (struct gpupolicy *)1;
		char err[GPUPOLICY_ERR_MAX];
		int rc;

		err[0] = '\0';
		if (c->spec[0] == '!')
			rc = parse_json(dq(c->spec + 1), &p, err, sizeof(err));
		else
			rc = parse_spec(c->spec, &p, err, sizeof(err));
		if (rc != GPUPOLICY_EINVAL || p != NULL ||
		    strncmp(err, c->err, strlen(c->err)) != 0)
			fail_msg("case %zu (%s): rc %d, err \"%s\", want \"%s\"", i, c->spec, rc,
			         err, c->err);
		/* The same answer without an error buffer. */
		if (c->spec[0] == '!')
			rc = parse_json(dq(c->spec + 1), &p, NULL, 0);
		else
			rc = parse_spec(c->spec, &p, NULL, 0);
		assert_int_equal(rc, GPUPOLICY_EINVAL);
		assert_null(p);
	}
}

/* A JSON list of n distinct strings "v0".."v<n-1>" (single quotes) into buf. */
static const char *many(char *buf, size_t cap, int n)
{
	size_t len = 0;

	len += (size_t)snprintf(buf + len, cap - len, "[");
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s'v%d'", i ? "," : "", i);
	snprintf(buf + len, cap - len, "]");
	return buf;
}

/* The caps: tiers, list entries, selector values and requirements; name length. */
static void test_refusals_caps(void **state)
{
	char spec[16384], list[4096], err[GPUPOLICY_ERR_MAX];
	struct gpupolicy *p = NULL;
	size_t len = 0;

	len += (size_t)snprintf(spec, sizeof(spec), "{'tiers':[");
	for (int i = 0; i <= GPUPOLICY_TIERS_MAX; i++)
		len += (size_t)snprintf(spec + len, sizeof(spec) - len,
		                        "%s{'name':'t%d','namespaces':['a']}", i ? "," : "", i);
	snprintf(spec + len, sizeof(spec) - len, "]}");
	assert_int_equal(parse_spec(spec, &p, err, sizeof(err)), GPUPOLICY_EINVAL);
	assert_string_equal(err, "spec.tiers: at most 16 tiers, got 17");

	snprintf(spec, sizeof(spec), "{'tiers':[{'name':'t','namespaces':%s}]}",
	         many(list, sizeof(list), GPUPOLICY_LIST_MAX + 1));
	assert_int_equal(parse_spec(spec, &p, err, sizeof(err)), GPUPOLICY_EINVAL);
	assert_string_equal(err, "spec.tiers[0].namespaces: at most 64 entries, got 65");
	snprintf(spec, sizeof(spec), "{'tiers':[{'name':'t','priorityClassNames':%s}]}",
	         many(list, sizeof(list), GPUPOLICY_LIST_MAX));
	assert_int_equal(parse_spec(spec, &p, err, sizeof(err)), 0);
	assert_int_equal(p->tiers[0].n_priority_classes, 64);
	gpupolicy_free(p);

	snprintf(spec, sizeof(spec),
	         "{'nodeSelector':{'matchExpressions':[{'key':'k','operator':'In','values':%s}]}}",
	         many(list, sizeof(list), GPUPOLICY_LIST_MAX + 1));
	assert_int_equal(parse_spec(spec, &p, err, sizeof(err)), GPUPOLICY_EINVAL);
	assert_string_equal(
	    err, "spec.nodeSelector.matchExpressions[0].values: at most 64 values, got 65");

	/* 32 requirements are fine, 33 are not (20 matchLabels + 13 expressions). */
	len = (size_t)snprintf(spec, sizeof(spec), "{'nodeSelector':{'matchLabels':{");
	for (int i = 0; i < 20; i++)
		len += (size_t)snprintf(spec + len, sizeof(spec) - len, "%s'l%d':'v'", i ? "," : "",
		                        i);
	len += (size_t)snprintf(spec + len, sizeof(spec) - len, "},'matchExpressions':[");
	for (int i = 0; i < 13; i++)
		len += (size_t)snprintf(spec + len, sizeof(spec) - len,
		                        "%s{'key':'e%d','operator':'Exists'}", i ? "," : "", i);
	snprintf(spec + len, sizeof(spec) - len, "]}}");
	assert_int_equal(parse_spec(spec, &p, err, sizeof(err)), GPUPOLICY_EINVAL);
	assert_string_equal(err, "spec.nodeSelector: at most 32 requirements (matchLabels and "
	                         "matchExpressions), got 33");

	char name[300];
	memset(name, 'a', 254);
	name[254] = '\0';
	snprintf(spec, sizeof(spec), "{'metadata':{'name':'%s'},'spec':{}}", name);
	assert_int_equal(parse_json(dq(spec), &p, err, sizeof(err)), GPUPOLICY_EINVAL);
	assert_string_equal(err, "metadata.name: at most 253 bytes, got 254");
}

/* What JSON text cannot say, a cJSON tree can: NaN, infinity. */
static void test_refusals_nan(void **state)
{
	cJSON *o = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(o, "metadata");
	cJSON *spec = cJSON_AddObjectToObject(o, "spec");
	struct gpupolicy *p = NULL;
	char err[GPUPOLICY_ERR_MAX];

	cJSON_AddStringToObject(md, "name", "p");
	cJSON_AddNumberToObject(spec, "threshold", NAN);
	assert_int_equal(gpupolicy_parse(o, &p, err, sizeof(err)), GPUPOLICY_EINVAL);
	assert_null(p);
	assert_string_equal(err, "spec.threshold: must be a number in (0, 1], got nan");
	cJSON_DeleteItemFromObject(spec, "threshold");
	cJSON_AddNumberToObject(spec, "warnThreshold", INFINITY);
	assert_int_equal(gpupolicy_parse(o, &p, err, sizeof(err)), GPUPOLICY_EINVAL);
	assert_string_equal(err, "spec.warnThreshold: must be a number in (0, 1], got inf");
	cJSON_DeleteItemFromObject(spec, "warnThreshold");
	cJSON_AddNumberToObject(md, "generation", NAN);
	assert_int_equal(gpupolicy_parse(o, &p, err, sizeof(err)), GPUPOLICY_EINVAL);
	assert_string_equal(err, "metadata.generation: must be an integer >= 0, got nan");
	assert_int_equal(gpupolicy_parse(NULL, &p, err, sizeof(err)), GPUPOLICY_EINVAL);
	assert_string_equal(err, "GPUMemoryPolicy: must be a JSON object, got nothing");
	/* A short err is cut, still terminated. */
	char small[8];
	assert_int_equal(gpupolicy_parse(NULL, &p, small, sizeof(small)), GPUPOLICY_EINVAL);
	assert_string_equal(small, "GPUMemo");
	cJSON_Delete(o);
}

/* ---- selectors ---- */

struct sel_case {
	const char *selector; /* single quotes */
	const char *const *labels;
	size_t n;
	int want;
};

static const char *const L_none[] = {NULL};
static const char *const L_h100[] = {"gpu", "h100", "zone", "a"};
static const char *const L_a100[] = {"gpu", "a100"};
static const char *const L_empty_val[] = {"gpu", ""};

static const struct sel_case sel_cases[] = {
    {"{}", L_none, 0, 1},
    {"{}", L_h100, 2, 1},
    {"{'matchLabels':{}}", L_none, 0, 1},
    {"{'matchLabels':{'gpu':'h100'}}", L_h100, 2, 1},
    {"{'matchLabels':{'gpu':'h100'}}", L_a100, 1, 0},
    {"{'matchLabels':{'gpu':'h100'}}", L_none, 0, 0},
    {"{'matchLabels':{'gpu':''}}", L_empty_val, 1, 1},
    {"{'matchExpressions':[{'key':'gpu','operator':'In','values':['a100','h100']}]}", L_h100, 2, 1},
    {"{'matchExpressions':[{'key':'gpu','operator':'In','values':['a100']}]}", L_h100, 2, 0},
    {"{'matchExpressions':[{'key':'gpu','operator':'In','values':['h100']}]}", L_none, 0, 0},
    {"{'matchExpressions':[{'key':'gpu','operator':'NotIn','values':['h100']}]}", L_h100, 2, 0},
    {"{'matchExpressions':[{'key':'gpu','operator':'NotIn','values':['h100']}]}", L_a100, 1, 1},
    /* NotIn: an absent key matches */
    {"{'matchExpressions':[{'key':'gpu','operator':'NotIn','values':['h100']}]}", L_none, 0, 1},
    {"{'matchExpressions':[{'key':'zone','operator':'Exists'}]}", L_h100, 2, 1},
    {"{'matchExpressions':[{'key':'zone','operator':'Exists'}]}", L_a100, 1, 0},
    {"{'matchExpressions':[{'key':'gpu','operator':'Exists'}]}", L_empty_val, 1, 1},
    {"{'matchExpressions':[{'key':'zone','operator':'DoesNotExist'}]}", L_h100, 2, 0},
    {"{'matchExpressions':[{'key':'zone','operator':'DoesNotExist'}]}", L_a100, 1, 1},
    /* matchLabels AND matchExpressions */
    {"{'matchLabels':{'gpu':'h100'},'matchExpressions':[{'key':'zone','operator':'In',"
     "'values':['a']}]}",
     L_h100, 2, 1},
    {"{'matchLabels':{'gpu':'h100'},'matchExpressions':[{'key':'zone','operator':'In',"
     "'values':['b']}]}",
     L_h100, 2, 0},
    {"{'matchLabels':{'gpu':'a100'},'matchExpressions':[{'key':'zone','operator':'In',"
     "'values':['a']}]}",
     L_h100, 2, 0},
    {"{'matchExpressions':[{'key':'gpu','operator':'Exists'},{'key':'zone','operator':"
     "'DoesNotExist'}]}",
     L_a100, 1, 1},
    {"{'matchExpressions':[{'key':'gpu','operator':'Exists'},{'key':'zone','operator':"
     "'DoesNotExist'}]}",
     L_h100, 2, 0},
};

static void test_selectors(void **state)
{
	for (size_t i = 0; i < sizeof(sel_cases) / sizeof(sel_cases[0]); i++) {
		const struct sel_case *c = &sel_cases[i];
		struct gpupolicy_labels l = {c->labels, c->n};
		struct gpupolicy *p = NULL;
		char spec[2048], err[GPUPOLICY_ERR_MAX];

		snprintf(spec, sizeof(spec), "{'nodeSelector':%s}", c->selector);
		if (parse_spec(spec, &p, err, sizeof(err)) != 0)
			fail_msg("case %zu: %s", i, err);
		if (labelsel_match(&p->node_selector, &l) != c->want ||
		    gpupolicy_selects(p, &l) != c->want)
			fail_msg("case %zu: %s on %zu labels: want %d", i, c->selector, c->n,
			         c->want);
		if (c->n == 0 && labelsel_match(&p->node_selector, NULL) != c->want)
			fail_msg("case %zu: NULL labels differ from none", i);
		gpupolicy_free(p);
	}
	/* An empty selector matches everything, no labels too. */
	struct labelsel empty = {NULL, 0};
	assert_int_equal(labelsel_match(&empty, NULL), 1);
}

/* Which policies apply to a node (gpupolicy_applies, the one rule): unusable ones never, a node
 * of unknown labels only by an empty nodeSelector (even one a node without labels matches). */
static void test_applies(void **state)
{
	static const char *const kv[] = {"gpu", "h100"};
	struct gpupolicy_labels h100 = {kv, 1}, none = {NULL, 0};
	struct gpupolicy *all = NULL, *gpu = NULL, *absent = NULL;
	char err[GPUPOLICY_ERR_MAX];

	assert_int_equal(parse_spec("{}", &all, err, sizeof(err)), 0);
	assert_int_equal(
	    parse_spec("{'nodeSelector':{'matchLabels':{'gpu':'h100'}}}", &gpu, err, sizeof(err)),
	    0);
	assert_int_equal(parse_spec("{'nodeSelector':{'matchExpressions':[{'key':'gpu',"
	                            "'operator':'DoesNotExist'}]}}",
	                            &absent, err, sizeof(err)),
	                 0);
	assert_int_equal(gpupolicy_applies(NULL, &h100), 0);
	assert_int_equal(gpupolicy_applies(NULL, NULL), 0);
	assert_int_equal(gpupolicy_applies(all, &h100), 1);
	assert_int_equal(gpupolicy_applies(all, NULL), 1);
	assert_int_equal(gpupolicy_applies(gpu, &h100), 1);
	assert_int_equal(gpupolicy_applies(gpu, &none), 0);
	assert_int_equal(gpupolicy_applies(gpu, NULL), 0);
	assert_int_equal(gpupolicy_applies(absent, &none), 1);
	assert_int_equal(gpupolicy_applies(absent, &h100), 0);
	assert_int_equal(gpupolicy_applies(absent, NULL), 0); /* unknown labels: not known absent */
	assert_int_equal(GPUPOLICY_SELECT_MAX, 64);
	gpupolicy_free(all);
	gpupolicy_free(gpu);
	gpupolicy_free(absent);
}

/* Which policies apply to a node (gpupolicy_select, the one rule): those that apply, in the
 * order given, NULL entries skipped, at most GPUPOLICY_SELECT_MAX even with more room;
 * gpupolicy_select_all counts past the cap (the status writer's). */
static void test_select(void **state)
{
	enum { N = GPUPOLICY_SELECT_MAX + 3 };
	static const char *const kv[] = {"gpu", "h100"};
	struct gpupolicy_labels h100 = {kv, 1};
	struct gpupolicy *all = must_parse("{'metadata':{'name':'all'},'spec':{}}");
	struct gpupolicy *other =
	    must_parse("{'metadata':{'name':'other'},'spec':{'nodeSelector':{'matchLabels':"
	               "{'gpu':'a100'}}}}");
	const struct gpupolicy *pols[N], *out[N + 1];
	(void)state;

	/* other, NULL, all, all, ...: N - 2 that apply */
	pols[0] = other;
	pols[1] = NULL;
	for (size_t i = 2; i < N; i++)
		pols[i] = all;
	assert_int_equal(gpupolicy_select(pols, N, &h100, out, N + 1), GPUPOLICY_SELECT_MAX);
	assert_ptr_equal(out[0], all);
	assert_ptr_equal(out[GPUPOLICY_SELECT_MAX - 1], all);
	assert_int_equal(gpupolicy_select(pols, N, &h100, out, 2), 2); /* room */
	assert_int_equal(gpupolicy_select(pols, N, NULL, out, N + 1), GPUPOLICY_SELECT_MAX);
	assert_int_equal(gpupolicy_select_all(pols, N, &h100, out, N + 1), N - 2);
	assert_int_equal(gpupolicy_select_all(pols, N, &h100, out, 5), 5);
	assert_int_equal(gpupolicy_select(pols, 0, &h100, out, N + 1), 0);
	assert_int_equal(gpupolicy_select(NULL, 0, &h100, out, N + 1), 0);
	/* the order given is kept */
	pols[0] = all;
	pols[1] = other;
	assert_int_equal(gpupolicy_select(pols, 2, &h100, out, N + 1), 1);
	static const char *const a100[] = {"gpu", "a100"};
	struct gpupolicy_labels la = {a100, 1};
	assert_int_equal(gpupolicy_select(pols, 2, &la, out, N + 1), 2);
	assert_ptr_equal(out[0], all);
	assert_ptr_equal(out[1], other);
	gpupolicy_free(all);
	gpupolicy_free(other);
}

/* ---- tiers: membership ---- */

static void test_tier_of(void **state)
{
	struct gpupolicy *p =
	    must_parse("{'metadata':{'name':'t'},'spec':{'tiers':["
	               "{'name':'rt-serving','priorityClassNames':['realtime'],"
	               "'namespaces':['serving']},"
	               "{'name':'rt','priorityClassNames':['realtime','critical']},"
	               "{'name':'labelled','namespaces':['ml','serving'],"
	               "'podSelector':{'matchLabels':{'tier':'batch'}}},"
	               "{'name':'rest','podSelector':{}}]}}");
	static const char *const batch[] = {"tier", "batch"};
	static const char *const other[] = {"tier", "web"};
	struct gpupolicy_labels lb = {batch, 1}, lo = {other, 1};

	/* first tier whose every criterion matches */
	assert_int_equal(gpupolicy_tier_of(p, "serving", "realtime", NULL), 0);
	assert_int_equal(gpupolicy_tier_of(p, "ml", "realtime", NULL), 1);
	assert_int_equal(gpupolicy_tier_of(p, "ml", "critical", &lb), 1);
	assert_int_equal(gpupolicy_tier_of(p, "ml", "low", &lb), 2);
	assert_int_equal(gpupolicy_tier_of(p, "serving", NULL, &lb), 2);
	/* AND: the namespace matches, the labels do not */
	assert_int_equal(gpupolicy_tier_of(p, "ml", "low", &lo), 3);
	assert_int_equal(gpupolicy_tier_of(p, "default", NULL, &lb), 3);
	/* no priority class ("" or NULL) never matches a tier listing priority classes */
	assert_int_equal(gpupolicy_tier_of(p, "serving", "", NULL), 3);
	assert_int_equal(gpupolicy_tier_of(p, "serving", NULL, NULL), 3);
	assert_int_equal(gpupolicy_tier_of(p, NULL, NULL, NULL), 3);
	gpupolicy_free(p);

	/* Without a catch-all, a pod of no tier is -1. */
	p = must_parse(realtime_batch);
	assert_int_equal(gpupolicy_tier_of(p, "ml", "realtime", NULL), 0);
	assert_int_equal(gpupolicy_tier_of(p, "ml", "batch", NULL), 1);
	assert_int_equal(gpupolicy_tier_of(p, "ml", "", NULL), -1);
	assert_int_equal(gpupolicy_tier_of(p, "ml", "other", NULL), -1);
	assert_int_equal(gpupolicy_tier_of(NULL, "ml", "batch", NULL), -1);
	gpupolicy_free(p);
}

/* ---- tiers: the rules ---- */

/* The seed's example on an 80Gi node. */
static void test_seed_example(void **state)
{
	struct gpupolicy *p = must_parse(realtime_batch);
	uint64_t tb[2] = {0, 0};
	struct gpupolicy_tier_input in = {.policy = p,
	                                  .pod = "ml/rt-1",
	                                  .node = "gpu-a",
	                                  .tier = 0,
	                                  .capacity_bytes = 80 * GI,
	                                  .tier_bytes = tb};
	struct gpupolicy_tier_result r;
	const uint64_t yield_limit = 41231686041ull; /* floor(0.8 x 48Gi): 38.4Gi */

	assert_string_equal(p->name, "realtime-batch");
	assert_int_equal(p->generation, 3);
	/* realtime: up to 48Gi (0.60 x 80Gi) in all */
	in.demand_bytes = 48 * GI;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 0);
	assert_null(r.reason);
	assert_int_equal(r.budget_bytes, 48 * GI);
	tb[0] = 40 * GI;
	in.demand_bytes = 8 * GI;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 0);
	in.demand_bytes = 8 * GI + 1;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 1);
	assert_string_equal(r.reason, "TierOverShare");
	assert_int_equal(r.budget_bytes, 48 * GI);
	tb[0] = 0;
	in.demand_bytes = 48 * GI + 1;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 1);
	assert_string_equal(r.reason, "TierOverShare");
	assert_string_equal(r.message,
	                    "placing ml/rt-1 (48Gi) on gpu-a would bring tier "
	                    "\"realtime\" of GPUMemoryPolicy \"realtime-batch\" to 48Gi, "
	                    "above its budget of 60 percent of 80Gi (48Gi)");

	/* batch: admitted while realtime declares up to 38.4Gi, refused one byte above */
	in.tier = 1;
	in.pod = "ml/b-3";
	in.demand_bytes = 20 * GI;
	tb[0] = yield_limit;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 0);
	assert_int_equal(r.budget_bytes, 0); /* batch has no maxShare */
	tb[0] = yield_limit + 1;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 1);
	assert_string_equal(r.reason, "TierYield");
	assert_string_equal(r.message,
	                    "ml/b-3 (20Gi) is in tier \"batch\" of GPUMemoryPolicy "
	                    "\"realtime-batch\", which yields to tier \"realtime\": on gpu-a "
	                    "\"realtime\" declares 38.4Gi, above 80 percent of its budget (38.4Gi "
	                    "of 48Gi, 60 percent of 80Gi)");
	assert_null(strchr(r.message, '%'));
	/* batch otherwise unlimited by the tier: the whole node and more already batch */
	tb[0] = 0;
	tb[1] = 500 * GI;
	in.demand_bytes = UINT64_MAX;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 0);

	/* a pod of no tier never violates */
	in.tier = -1;
	tb[0] = UINT64_MAX;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 0);
	assert_null(r.reason);
	gpupolicy_free(p);
}

/* The header's two message shapes, word for word. */
static void test_header_messages(void **state)
{
	struct gpupolicy *p =
	    must_parse("{'metadata':{'name':'split'},'spec':{'tiers':["
	               "{'name':'realtime','priorityClassNames':['realtime'],'maxShare':0.6},"
	               "{'name':'batch','priorityClassNames':['batch'],'maxShare':0.4,"
	               "'yield':{'tier':'realtime','above':0.8}}]}}");
	uint64_t tb[2] = {0, 20 * GI};
	struct gpupolicy_tier_input in = {.policy = p,
	                                  .pod = "ml/b-3",
	                                  .node = "gpu-a",
	                                  .tier = 1,
	                                  .demand_bytes = 20 * GI,
	                                  .capacity_bytes = 80 * GI,
	                                  .tier_bytes = tb};
	struct gpupolicy_tier_result r;

	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_string_equal(r.reason, "TierOverShare");
	assert_int_equal(r.budget_bytes, 32 * GI);
	assert_string_equal(r.message, "placing ml/b-3 (20Gi) on gpu-a would bring tier \"batch\" "
	                               "of GPUMemoryPolicy \"split\" to 40Gi, above its budget of "
	                               "40 percent of 80Gi (32Gi)");
	/* Over-share is judged before yield: both broken, over-share is told. */
	tb[0] = 40 * GI;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_string_equal(r.reason, "TierOverShare");
	tb[1] = 0;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_string_equal(r.reason, "TierYield");
	assert_string_equal(
	    r.message, "ml/b-3 (20Gi) is in tier \"batch\" of GPUMemoryPolicy \"split\", which "
	               "yields to tier \"realtime\": on gpu-a \"realtime\" declares 40Gi, "
	               "above 80 percent of its budget (38.4Gi of 48Gi, 60 percent of 80Gi)");
	gpupolicy_free(p);
}

static void test_check_tiers_edges(void **state)
{
	struct gpupolicy *p = must_parse(realtime_batch);
	uint64_t tb[2] = {0, 0};
	struct gpupolicy_tier_input in = {.policy = p, .tier = 0, .tier_bytes = tb};
	struct gpupolicy_tier_result r;

	/* No overflow at the largest capacity: budget floor(UINT64_MAX x 0.6). */
	in.capacity_bytes = UINT64_MAX;
	in.demand_bytes = UINT64_MAX / 10 * 6 + (UINT64_MAX % 10) * 6 / 10;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.budget_bytes, in.demand_bytes);
	assert_int_equal(r.violated, 0);
	/* saturating add: already-declared near UINT64_MAX plus any demand is over */
	tb[0] = UINT64_MAX - 1;
	in.demand_bytes = 10;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 1);
	assert_non_null(strstr(r.message, "(unnamed pod)"));
	assert_non_null(strstr(r.message, "(unnamed node)"));
	/* a yield at UINT64_MAX capacity: floor(floor(max x 6/10) x 8/10), exactly */
	uint64_t b = UINT64_MAX / 10 * 6 + (UINT64_MAX % 10) * 6 / 10;
	uint64_t limit = b / 10 * 8 + (b % 10) * 8 / 10;
	in.tier = 1;
	tb[0] = limit;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 0);
	tb[0] = limit + 1;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 1);
	assert_string_equal(r.reason, "TierYield");
	gpupolicy_free(p);
}

/* A ratio is rounded to ppm, not truncated: 0.500002 x 1e6 is 500001.99999999994 in double. */
static void test_ppm_rounding(void **state)
{
	struct gpupolicy *p =
	    must_parse("{'metadata':{'name':'p'},'spec':{'tiers':[{'name':'t','namespaces':['a'],"
	               "'maxShare':0.500002}]}}");
	uint64_t tb[1] = {0};
	struct gpupolicy_tier_input in = {.policy = p,
	                                  .tier = 0,
	                                  .demand_bytes = 500002,
	                                  .capacity_bytes = 1000000,
	                                  .tier_bytes = tb};
	struct gpupolicy_tier_result r;

	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.budget_bytes, 500002);
	assert_int_equal(r.violated, 0);
	in.demand_bytes++;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), 0);
	assert_int_equal(r.violated, 1);
	gpupolicy_free(p);
}

static void test_check_tiers_invalid(void **state)
{
	struct gpupolicy *p = must_parse(realtime_batch);
	uint64_t tb[2] = {0, 0};
	struct gpupolicy_tier_input in = {
	    .policy = p, .tier = 2, .capacity_bytes = GI, .tier_bytes = tb};
	struct gpupolicy_tier_result r;

	assert_int_equal(gpupolicy_check_tiers(&in, &r), -1);
	assert_int_equal(r.violated, 0);
	assert_string_equal(r.message, "gpupolicy: invalid tier input: tier index out of range");
	in.tier = -2;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), -1);
	in.tier = 0;
	in.tier_bytes = NULL;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), -1);
	assert_int_equal(gpupolicy_check_tiers(NULL, &r), -1);
	assert_int_equal(gpupolicy_check_tiers(&in, NULL), -1);
	in.policy = NULL;
	assert_int_equal(gpupolicy_check_tiers(&in, &r), -1);
	gpupolicy_free(p);
}

/* ---- precedence ---- */

static struct gpupolicy mk(const char *name, enum gpupolicy_mode mode, double threshold,
                           double warn)
{
	struct gpupolicy p;

	memset(&p, 0, sizeof(p));
	snprintf(p.name, sizeof(p.name), "%s", name);
	p.mode = mode;
	p.has_threshold = threshold > 0;
	p.threshold = threshold;
	p.has_warn_threshold = warn > 0;
	p.warn_threshold = warn;
	return p;
}

struct want_check {
	enum gpupolicy_mode mode;
	double threshold, warn;
	const char *source;
};

static void expect_plan(const char *what, const struct gpupolicy_plan *plan,
                        const struct want_check *w, size_t n)
{
	if (plan->n != n)
		fail_msg("%s: %zu checks, want %zu", what, plan->n, n);
	for (size_t i = 0; i < n; i++) {
		const struct gpupolicy_check *c = &plan->checks[i];

		if (c->mode != w[i].mode || c->threshold != w[i].threshold ||
		    c->warn_threshold != w[i].warn || strcmp(c->source, w[i].source) != 0)
			fail_msg("%s: check %zu is {%s, %g, %g, %s}, want {%s, %g, %g, %s}", what,
			         i, gpupolicy_mode_name(c->mode), c->threshold, c->warn_threshold,
			         c->source, gpupolicy_mode_name(w[i].mode), w[i].threshold,
			         w[i].warn, w[i].source);
	}
}

static void test_resolve(void **state)
{
	struct gpupolicy e1 = mk("e1", GPUPOLICY_ENFORCE, 0.8, 0),
	                 e2 = mk("e2", GPUPOLICY_ENFORCE, 0.7, 0.6),
	                 e3 = mk("e3", GPUPOLICY_ENFORCE, 0.7, 0.65),
	                 e_none = mk("e-none", GPUPOLICY_ENFORCE, 0, 0.5),
	                 w1 = mk("w1", GPUPOLICY_WARN, 0.75, 0),
	                 w2 = mk("w2", GPUPOLICY_WARN, 0.6, 0.5),
	                 w_loose = mk("w-loose", GPUPOLICY_WARN, 0.95, 0),
	                 a1 = mk("a1", GPUPOLICY_AUDIT, 0.5, 0.4),
	                 a2 = mk("a2", GPUPOLICY_AUDIT, 0.55, 0);
	struct gpupolicy_flags enforce = {0.9, 0.8, POLICY_ENFORCE}, warn = {0.9, 0.8, POLICY_WARN};
	struct gpupolicy_plan plan;

	/* no policy: the flags, in their mode */
	gpupolicy_resolve(NULL, 0, &enforce, 0, 0, &plan);
	expect_plan("none", &plan, (struct want_check[]){{GPUPOLICY_ENFORCE, 0.9, 0.8, "flags"}},
	            1);
	gpupolicy_resolve(NULL, 0, &warn, 0, 0, &plan);
	expect_plan("none, warn", &plan, (struct want_check[]){{GPUPOLICY_WARN, 0.9, 0.8, "flags"}},
	            1);

	/* the annotation beats every policy's threshold (warn and audit ones too); the enforcing
	 * policies' warnThreshold still beats the flags' */
	const struct gpupolicy *all[] = {&e2, &w2, &a1};
	gpupolicy_resolve(all, 3, &enforce, 1, 0.95, &plan);
	expect_plan("annotation", &plan,
	            (struct want_check[]){{GPUPOLICY_ENFORCE, 0.95, 0.6, "node annotation"}}, 1);
	gpupolicy_resolve(all, 3, &warn, 1, 0.5, &plan);
	expect_plan("annotation, warn", &plan,
	            (struct want_check[]){{GPUPOLICY_WARN, 0.5, 0.6, "node annotation"}}, 1);
	const struct gpupolicy *wa_only[] = {&w2, &a1};
	gpupolicy_resolve(wa_only, 2, &enforce, 1, 0.95, &plan);
	expect_plan("annotation, no enforcing policy", &plan,
	            (struct want_check[]){{GPUPOLICY_ENFORCE, 0.95, 0.8, "node annotation"}}, 1);

	/* an enforcing policy beats the flags, even a looser one */
	const struct gpupolicy *one[] = {&e1};
	gpupolicy_resolve(one, 1, &enforce, 0, 0, &plan);
	expect_plan("enforce policy", &plan,
	            (struct want_check[]){{GPUPOLICY_ENFORCE, 0.8, 0.8, "e1"}}, 1);
	struct gpupolicy loose = mk("loose", GPUPOLICY_ENFORCE, 0.95, 0);
	const struct gpupolicy *lp[] = {&loose};
	gpupolicy_resolve(lp, 1, &warn, 0, 0, &plan);
	expect_plan("enforce policy over warn flags", &plan,
	            (struct want_check[]){{GPUPOLICY_ENFORCE, 0.95, 0.8, "loose"}}, 1);

	/* several enforcing: the strictest, the first on ties; warn: smallest set */
	const struct gpupolicy *es[] = {&e1, &e2, &e3, &e_none};
	gpupolicy_resolve(es, 4, &enforce, 0, 0, &plan);
	expect_plan("strictest", &plan, (struct want_check[]){{GPUPOLICY_ENFORCE, 0.7, 0.5, "e2"}},
	            1);
	const struct gpupolicy *es2[] = {&e3, &e1, &e2};
	gpupolicy_resolve(es2, 3, &enforce, 0, 0, &plan);
	expect_plan("strictest, tie", &plan,
	            (struct want_check[]){{GPUPOLICY_ENFORCE, 0.7, 0.6, "e3"}}, 1);
	/* a policy without a threshold keeps the flags' threshold and lowers only the warning */
	const struct gpupolicy *en[] = {&e_none};
	gpupolicy_resolve(en, 1, &enforce, 0, 0, &plan);
	expect_plan("no threshold", &plan,
	            (struct want_check[]){{GPUPOLICY_ENFORCE, 0.9, 0.5, "flags"}}, 1);

	/* warn and audit policies never replace the flags: they add checks */
	const struct gpupolicy *wa[] = {&a2, &w1, &a1, &w2};
	gpupolicy_resolve(wa, 4, &enforce, 0, 0, &plan);
	expect_plan("warn+audit", &plan,
	            (struct want_check[]){{GPUPOLICY_ENFORCE, 0.9, 0.8, "flags"},
	                                  {GPUPOLICY_WARN, 0.6, 0.5, "w2"},
	                                  {GPUPOLICY_AUDIT, 0.5, 0.4, "a1"}},
	            3);
	const struct gpupolicy *wl[] = {&w_loose};
	gpupolicy_resolve(wl, 1, &enforce, 0, 0, &plan);
	expect_plan("loose warn", &plan,
	            (struct want_check[]){{GPUPOLICY_ENFORCE, 0.9, 0.8, "flags"},
	                                  {GPUPOLICY_WARN, 0.95, 0.8, "w-loose"}},
	            2);
	const struct gpupolicy *aa[] = {&a2};
	gpupolicy_resolve(aa, 1, &enforce, 0, 0, &plan);
	expect_plan("audit only", &plan,
	            (struct want_check[]){{GPUPOLICY_ENFORCE, 0.9, 0.8, "flags"},
	                                  {GPUPOLICY_AUDIT, 0.55, 0.8, "a2"}},
	            2);

	/* flags in warn mode and warn policies: one warn check, the smaller threshold */
	const struct gpupolicy *ww[] = {&w1};
	gpupolicy_resolve(ww, 1, &warn, 0, 0, &plan);
	expect_plan("merged", &plan, (struct want_check[]){{GPUPOLICY_WARN, 0.75, 0.8, "w1"}}, 1);
	gpupolicy_resolve(wl, 1, &warn, 0, 0, &plan);
	expect_plan("merged, flags smaller", &plan,
	            (struct want_check[]){{GPUPOLICY_WARN, 0.9, 0.8, "flags"}}, 1);
	const struct gpupolicy *ww2[] = {&w1, &w2, &a2};
	gpupolicy_resolve(ww2, 3, &warn, 0, 0, &plan);
	expect_plan("merged + audit", &plan,
	            (struct want_check[]){{GPUPOLICY_WARN, 0.6, 0.5, "w2"},
	                                  {GPUPOLICY_AUDIT, 0.55, 0.8, "a2"}},
	            2);

	/* everything: enforce, warn and audit checks, enforce first */
	const struct gpupolicy *ev[] = {&a1, &w1, &e1, &e2};
	gpupolicy_resolve(ev, 4, &warn, 0, 0, &plan);
	expect_plan("all", &plan,
	            (struct want_check[]){{GPUPOLICY_ENFORCE, 0.7, 0.6, "e2"},
	                                  {GPUPOLICY_WARN, 0.75, 0.8, "w1"},
	                                  {GPUPOLICY_AUDIT, 0.5, 0.4, "a1"}},
	            3);
}

/* What parsing gives is what resolve reads: a parsed policy's name is the source. */
static void test_resolve_parsed(void **state)
{
	struct gpupolicy *p = must_parse(
	    "{'metadata':{'name':'strict'},'spec':{'threshold':0.5,'warnThreshold':0.45}}");
	const struct gpupolicy *sel[] = {p};
	struct gpupolicy_flags f = {0.9, 0.8, POLICY_ENFORCE};
	struct gpupolicy_plan plan;

	gpupolicy_resolve(sel, 1, &f, 0, 0, &plan);
	expect_plan("parsed", &plan,
	            (struct want_check[]){{GPUPOLICY_ENFORCE, 0.5, 0.45, "strict"}}, 1);
	gpupolicy_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_full),      cmocka_unit_test(test_parse_defaults),
	    cmocka_unit_test(test_refusals),        cmocka_unit_test(test_refusals_caps),
	    cmocka_unit_test(test_refusals_nan),    cmocka_unit_test(test_selectors),
	    cmocka_unit_test(test_applies),         cmocka_unit_test(test_select),
	    cmocka_unit_test(test_tier_of),         cmocka_unit_test(test_seed_example),
	    cmocka_unit_test(test_header_messages), cmocka_unit_test(test_check_tiers_edges),
	    cmocka_unit_test(test_ppm_rounding),    cmocka_unit_test(test_check_tiers_invalid),
	    cmocka_unit_test(test_resolve),         cmocka_unit_test(test_resolve_parsed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
