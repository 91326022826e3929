# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster model's network part: where the cluster's pods may connect (its NetworkPolicies'
egress) and how the login Service is reached, beside types.py, which holds them in
SlurmClusterSpec.egress and Login.service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import DNS1123_LABEL, FreeForm, spec_field

# Where API servers, kubelets and cloud metadata live: never reached through egress.internet.
PRIVATE_RANGES_V4 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16",
                     "127.0.0.0/8")
PRIVATE_RANGES_V6 = ("fc00::/7", "fe80::/10", "::1/128")


@dataclass(frozen=True)
class DnsServer:
    """The Kubernetes cluster's DNS server pods: the only resolver the cluster's pods may ask."""

    namespace: str = spec_field("Namespace of the DNS server pods.", "kube-system", pattern=DNS1123_LABEL)
    pod_labels: Dict[str, str] = spec_field(
        "Labels that select the DNS server pods (kubeadm, kind, EKS, GKE and AKS label CoreDNS or "
        "kube-dns k8s-app=kube-dns). A node-local DNS cache on a link-local address is not a pod: "
        "list it in egress.to.",
        factory=lambda: {"k8s-app": "kube-dns"},
    )


@dataclass(frozen=True)
class Egress:
    """Where the cluster's pods (jobs and ssh sessions included) may connect, with networkPolicy:
    each other and the cluster's DNS always; the rest only as listed here."""

    dns: DnsServer = spec_field(
        "The cluster's DNS server: port 53 is open to these pods only, so a job cannot send DNS "
        "queries (a way to carry data out) to any other address.",
        factory=DnsServer,
    )

    internet: bool = spec_field(
        "Allow public addresses: everything outside the private (RFC 1918, fc00::/7), shared "
        "(100.64.0.0/10), link-local and loopback ranges, where API servers, kubelets and cloud "
        "metadata (169.254.169.254) live. A public API server endpoint is a public address: "
        "list it in no rule and keep this false, or block it at the site's firewall.",
        False,
    )
    to: List[FreeForm] = spec_field(
        "More NetworkPolicy egress rules, in Kubernetes' own form ({to: [...], ports: [...]}): an "
        "external slurmdbd or database, license servers, storage.",
        factory=list,
    )


@dataclass(frozen=True)
class LoginService:
    """What a site sets on the login Service beyond its type: how its cloud's load balancer is made
    and whom it admits."""

    annotations: Dict[str, str] = spec_field(
        "Annotations of the login Service, read by the cloud's load balancer controller: an internal "
        "load balancer (service.beta.kubernetes.io/aws-load-balancer-scheme: internal; "
        "networking.gke.io/load-balancer-type: Internal; "
        "service.beta.kubernetes.io/azure-load-balancer-internal: 'true'), its addresses, its health "
        "checks. Keys under slurmkube.io/ are the product's and refused.",
        factory=dict,
    )
    load_balancer_source_ranges: List[str] = spec_field(
        "Client address ranges (CIDRs) the load balancer admits, serviceType LoadBalancer only. Empty: "
        "every address may reach sshd.",
        factory=list,
        pattern=r"^[0-9A-Fa-f.:]+/[0-9]{1,3}$",
        pattern_doc="an address range like 203.0.113.0/24 or 2001:db8::/32",
        max_length=43,  # the longest IPv6 range, ffff:...:ffff/128
        max_items=64,
        unique=True,
    )
    external_traffic_policy: Optional[str] = spec_field(
        "Cluster: every Kubernetes node forwards ssh to a login pod, and sshd sees the node's address. "
        "Local: only nodes running a login pod answer, and sshd logs the client's own address (and "
        "loadBalancerSourceRanges are enforced on it). NodePort and LoadBalancer only; Kubernetes' "
        "default (Cluster) when unset.",
        None,
        enum=("Cluster", "Local"),
    )
