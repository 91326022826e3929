# shellcheck shell=bash
# Sourced by kind.sh after lib.sh (node_kubectl, kind_log): a new cluster is up once pods on any
# two nodes can talk. kind waits for Ready nodes only; kube-router must also have given every node
#   - a route to every other node's pod range (learnt over BGP a few seconds later), and
#   - every pod range in the node's ipset kube-router-pod-subnets: traffic to a range missing
#     there leaves masqueraded as the node, and the NetworkPolicies where it arrives refuse it.
# The second stayed missing on one node for good in a quickstart (2026-12-01: that node's
# kube-router started before the next worker had its range, and its periodic syncs never
# added it; slurmd there waited 15 minutes for slurmctld): such a kube-router is restarted
# once, and learns every range as it starts.

# pod_network_gaps NAME: each node that lacks a route to another node's pod range or a range in
# its kube-router-pod-subnets, a line each; "nodes" when the node list cannot be read yet.
pod_network_gaps() {
  local name=$1 ranges node other range subnets
  ranges=$(node_kubectl "$name" get nodes \
    -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR}{"\n"}{end}') || {
    echo nodes
    return 0
  }
  while read -r node _; do
    subnets=$(docker exec "$node" ipset list kube-router-pod-subnets 2>/dev/null || true)
    while read -r other range; do
      if [[ -z $range ]] || ! awk -v range="$range" '$1 == range { found = 1 } END { exit !found }' <<<"$subnets" ||
        { [[ $other != "$node" ]] && [[ -z $(docker exec "$node" ip route show "$range") ]]; }; then
        echo "$node"
        break
      fi
    done <<<"$ranges"
  done <<<"$ranges"
}

# wait_for_pod_network NAME SECONDS: until no node has a gap; after RESTART_AFTER seconds (30)
# the kube-router of each node still lacking one is restarted, once. Fails at the deadline.
wait_for_pod_network() {
  local name=$1 deadline=$((SECONDS + $2)) restart_at=$((SECONDS + ${POD_NETWORK_RESTART_AFTER:-30})) gaps node
  local -A restarted=()
  while gaps=$(pod_network_gaps "$name") && [[ -n $gaps ]]; do
    if ((SECONDS >= deadline)); then
      kind_log "the pod network of $name is incomplete on: $(tr '\n' ' ' <<<"$gaps")"
      return 1
    fi
    if ((SECONDS >= restart_at)); then
      for node in $gaps; do
        [[ $node == nodes || -n ${restarted[$node]:-} ]] && continue
        restarted[$node]=1
        kind_log "$node's kube-router lacks another node's pod range (route or ipset): restarting it"
        node_kubectl "$name" -n kube-system delete pod -l k8s-app=kube-router \
          --field-selector "spec.nodeName=$node" --wait=false >/dev/null || true
      done
    fi
    sleep "${POD_NETWORK_POLL_SECONDS:-2}"
  done
}
