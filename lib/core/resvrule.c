/*
 * resvrule: when a reservation stops counting (resvrule.h). The rules that read a Pod object.
 */
#include "resvrule.h"

#include "jsonpath.h"
#include "pod.h"

#include <string.h>

const char *resv_pod_gone(const struct cJSON *pod, const char *node)
{
	const char *bound = json_str(pod, "spec", "nodeName", NULL);
	int unbound = bound == NULL || bound[0] == '\0';

	if (!unbound && strcmp(bound, node) != 0)
		return "bound to another node";
	if (pod_finished(pod))
		return "finished";
	if (unbound && pod_being_deleted(pod))
		return "deleted before binding";
	return NULL;
}
