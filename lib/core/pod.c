/*
 * pod: facts about a Pod object read the same way everywhere (pod.h).
 */
#include "pod.h"

#include <stddef.h>
#include <string.h>

#include "demand.h"
#include "jsonpath.h"

int pod_finished(const struct cJSON *pod)
{
	const char *phase = json_str(pod, "status", "phase", NULL);

	return phase != NULL && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
}

int pod_is_mirror(const struct cJSON *pod)
{
	return json_at(pod, "metadata", "annotations", POD_MIRROR_ANNOTATION, NULL) != NULL;
}

void pod_demand(const struct cJSON *pod, const struct demand_config *cfg, struct demand *d)
{
	if (demand_from_pod(pod, cfg, d) != 0 && d->status != DEMAND_INVALID)
		d->status = DEMAND_INVALID; /* demand_from_pod fills status either way */
}
