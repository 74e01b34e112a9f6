# Declared GPU memory per node, computed from the API's objects alone (the tests' oracle: it
# never asks the webhook). Inputs: $nodes[0] (NodeList), $pods[0] (PodList),
# $default_threshold (the webhook's --threshold). Output: one object per node that has GPU
# capacity labels:
#   {node, capacity, threshold, limit, declared, over, pods: [{pod, demand}]}   (bytes)
# Rules, as issue 2 states them: capacity = nvidia.com/gpu.memory (MiB per GPU; a value too
# large to be MiB is bytes) x nvidia.com/gpu.count, or annotation gpu-memory-guard.io/gpu-memory
# per GPU; threshold = annotation gpu-memory-guard.io/threshold, else the default; usage = every
# pod with spec.nodeName = node except Succeeded/Failed (terminating pods included); a pod's
# demand follows the effective-request rule over GPU_MEMORY_LIMIT of its GPU containers; a GPU
# container without a readable declaration counts as whole GPUs.

def qty:
  (capture("^(?<num>[+]?[0-9]*[.]?[0-9]+)(?<suf>[a-zA-Z]*|[eE][+-]?[0-9]+)$")
   // error("bad quantity " + .)) as $m
  | ($m.num | tonumber) as $n
  | {"": 1, "Ki": 1024, "Mi": 1048576, "Gi": 1073741824, "Ti": 1099511627776,
     "Pi": 1125899906842624, "Ei": 1152921504606846976, "n": 1e-9, "u": 1e-6, "m": 1e-3,
     "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}[$m.suf] as $mul
  | if $mul != null then $n * $mul
    elif ($m.suf | test("^[eE]")) then $n * pow(10; $m.suf[1:] | tonumber)
    else error("bad quantity suffix " + $m.suf) end
  | ceil;

def gpus: [(.resources.limits // {})["nvidia.com/gpu"], (.resources.requests // {})["nvidia.com/gpu"]]
  | map(select(. != null) | tonumber) | max // 0;

# Declared bytes of one container; $per_gpu = the node's memory per GPU (for undeclared ones).
def decl($per_gpu):
  if gpus <= 0 then 0
  else ([(.env // [])[] | select(.name == "GPU_MEMORY_LIMIT" and (.value // "") != "") | .value][0]) as $v
    | if $v == null then gpus * $per_gpu else ($v | try qty catch (gpus * $per_gpu)) end
  end;

def demand($per_gpu):
  [.spec.containers[] | decl($per_gpu)] as $app
  | [(.spec.initContainers // [])[] | {side: (.restartPolicy == "Always"), d: decl($per_gpu)}] as $init
  | ([$init[] | select(.side) | .d] | add // 0) as $sidecars
  | [range(0; $init | length) as $i | select($init[$i].side | not)
     | $init[$i].d + ([$init[0:$i][] | select(.side) | .d] | add // 0)] as $inits
  | ([(($app | add // 0) + $sidecars)] + $inits) | max;

def per_gpu_bytes:
  (.metadata.annotations // {}) as $a | (.metadata.labels // {}) as $l
  | if $a["gpu-memory-guard.io/gpu-memory"] then ($a["gpu-memory-guard.io/gpu-memory"] | qty)
    elif $l["nvidia.com/gpu.memory"] then ($l["nvidia.com/gpu.memory"] | tonumber
      | if . > 16777216 then . else . * 1048576 end)
    else null end;

def gpu_count:
  (.metadata.annotations // {})["gpu-memory-guard.io/gpu-count"]
  // (.metadata.labels // {})["nvidia.com/gpu.count"] | if . == null then null else tonumber end;

$nodes[0].items[]
| select(per_gpu_bytes != null and gpu_count != null)
| . as $node
| ($node | per_gpu_bytes) as $per_gpu
| ($per_gpu * ($node | gpu_count)) as $capacity
| (($node.metadata.annotations // {})["gpu-memory-guard.io/threshold"] // $default_threshold
   | tonumber) as $threshold
| [$pods[0].items[]
   | select(.spec.nodeName == $node.metadata.name)
   | select(.status.phase != "Succeeded" and .status.phase != "Failed")
   | {pod: (.metadata.namespace + "/" + .metadata.name), demand: demand($per_gpu),
      phase: .status.phase}
   | select(.demand > 0)] as $on
| ([$on[].demand] | add // 0) as $declared
| {node: $node.metadata.name, capacity: $capacity, threshold: $threshold,
   limit: ($capacity * $threshold), declared: $declared,
   over: ($declared > $capacity * $threshold), pods: $on}
