// extender-gen writes test/data/extender-args-{nodenames,nodes}.json with the real
// k8s.io/kube-scheduler extender/v1 types and encoding/json, as kube-scheduler's
// HTTPExtender.send marshals them (pkg/scheduler/extender.go). Regenerate (offline, from the
// Go module cache): cd test/data/extender-gen && GOFLAGS=-mod=mod GOPROXY=off go run . ..

// Writes ExtenderArgs the way kube-scheduler's HTTPExtender.send does: json.Marshal of the
// extender/v1 types, both forms (nodeCacheCapable true: NodeNames; false: Nodes).
package main

import (
	"encoding/json"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

func node(name, mem, threshold string) v1.Node {
	ann := map[string]string{"gpu-memory-guard.io/gpu-memory": mem}
	if threshold != "" {
		ann["gpu-memory-guard.io/threshold"] = threshold
	}
	return v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-node-" + name), ResourceVersion: "100",
			Labels:      map[string]string{"nvidia.com/gpu.count": "1", "kubernetes.io/hostname": name},
			Annotations: ann},
		Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), v1.ResourceCPU: resource.MustParse("16")},
			Allocatable: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), v1.ResourceCPU: resource.MustParse("16")},
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
}

func main() {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "llama-0", Namespace: "ml", UID: "uid-ml-llama-0", ResourceVersion: "200"},
		Spec: v1.PodSpec{
			SchedulerName: "default-scheduler",
			Containers: []v1.Container{{
				Name: "vllm", Image: "vllm/vllm-openai:v0.6.0",
				Env: []v1.EnvVar{{Name: "GPU_MEMORY_LIMIT", Value: "10Gi"}},
				Resources: v1.ResourceRequirements{
					Limits:   v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
					Requests: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
				},
			}},
		},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	names := []string{"n-full", "n-room", "n-empty", "n-annot", "n-small", "n-nocap", "n-unknown"}
	a := extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names}
	out, _ := json.Marshal(&a)
	os.WriteFile(os.Args[1]+"/extender-args-nodenames.json", append(out, '\n'), 0o644)
	list := &v1.NodeList{Items: []v1.Node{
		node("n-full", "80Gi", ""), node("n-room", "80Gi", ""), node("n-annot", "80Gi", "0.76"),
	}}
	b := extenderv1.ExtenderArgs{Pod: pod, Nodes: list}
	out, _ = json.Marshal(&b)
	os.WriteFile(os.Args[1]+"/extender-args-nodes.json", append(out, '\n'), 0o644)
}
