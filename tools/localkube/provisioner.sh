#!/usr/bin/env bash
# A tiny dynamic provisioner over one directory that every node sees at the same path (the only
# node of localkube; on kind, a host directory mounted into every node): every pending claim of
# our StorageClass gets a hostPath PersistentVolume in a directory of its own (any access mode,
# ReadWriteMany included: every pod on any node sees the same files), and a released volume's
# directory is removed.
#   provisioner.sh KUBECTL KUBECONFIG VOLUME_DIR STORAGE_CLASS
# An empty KUBECONFIG means in-cluster (its pod's service account).
set -euo pipefail

kubectl=$1 kubeconfig=$2 volume_dir=$3 class=$4
k() {
  if [[ -n $kubeconfig ]]; then
    "$kubectl" --kubeconfig "$kubeconfig" "$@"
  else
    "$kubectl" "$@"
  fi
}

provision() {
  local ns=$1 name=$2 uid=$3 size=$4 modes=$5 dir="$volume_dir/pvc-$3"
  mkdir -p "$dir"
  chmod 0777 "$dir"
  local mode_list=""
  for m in ${modes//,/ }; do mode_list+="\"$m\","; done
  k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "PersistentVolume",
 "metadata": {"name": "pvc-$uid", "annotations": {"pv.kubernetes.io/provisioned-by": "localkube.local/hostpath"}},
 "spec": {"capacity": {"storage": "$size"}, "accessModes": [${mode_list%,}],
          "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "$class",
          "hostPath": {"path": "$dir", "type": "Directory"},
          "claimRef": {"namespace": "$ns", "name": "$name", "uid": "$uid"}}}
EOF
  echo "provisioned pvc-$uid for $ns/$name ($size, $modes)"
}

reclaim() {
  local pv=$1 path=$2
  case $path in "$volume_dir"/pvc-*) rm -rf --one-file-system "$path" ;; esac
  k delete pv "$pv" --wait=false >/dev/null
  echo "deleted $pv"
}

pending='{range .items[?(@.status.phase=="Pending")]}{.metadata.namespace} {.metadata.name} {.metadata.uid} {.spec.resources.requests.storage} {.spec.storageClassName} {.spec.volumeName}|{.spec.accessModes[*]}{"\n"}{end}'
released='{range .items[?(@.status.phase=="Released")]}{.metadata.name} {.spec.storageClassName} {.spec.hostPath.path}{"\n"}{end}'

while true; do
  while read -r ns name uid size sc rest; do
    [[ $sc == "$class" ]] || continue
    volume=${rest%%|*}
    [[ -z ${volume// /} ]] || continue
    modes=${rest#*|}
    provision "$ns" "$name" "$uid" "$size" "${modes// /,}" || true
  done < <(k get pvc -A -o jsonpath="$pending" 2>/dev/null || true)
  while read -r pv sc path; do
    [[ $sc == "$class" ]] && { reclaim "$pv" "$path" || true; }
  done < <(k get pv -o jsonpath="$released" 2>/dev/null || true)
  sleep 2
done
