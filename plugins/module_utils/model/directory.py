# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec.directory: users and groups from the site's directory (LDAP), resolved by SSSD in the pods
that look users up (login, controller, workers) and in the jail; the jail's own accounts
(jail_user) stay and come first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import DNS1123_SUBDOMAIN, spec_field

# An LDAP URI sssd.conf's ldap_uri takes: ldap:// (StartTLS when a CA is given) or ldaps://, a
# host and an optional port; no blank or comma (sssd.conf joins the list with commas).
LDAP_URI = r"^ldaps?://[A-Za-z0-9.:\[\]-]+(:[0-9]+)?/?$"
# A distinguished name as one sssd.conf value: printable, no line break (RFC 4514 allows the rest).
DN = r"^[^\x00-\x1f\x7f]+=[^\x00-\x1f\x7f]*$"
LDAP_SCHEMAS = ("rfc2307", "rfc2307bis")


@dataclass(frozen=True)
class Ldap:
    """The directory server and where its users and groups are (SSSD's ldap provider)."""

    uris: List[str] = spec_field(
        "The servers, tried in order (sssd.conf ldap_uri): ldaps://host[:port], or ldap://host[:port] (with "
        "caSecret: StartTLS, required; without: plain text, for tests only).",
        factory=list, pattern=LDAP_URI, max_items=8, max_length=253)
    search_base: Optional[str] = spec_field("Where users and groups are searched (ldap_search_base). Required.",
                                            None, pattern=DN, max_length=1024)
    user_search_base: Optional[str] = spec_field("Users only under this DN (ldap_user_search_base).", None,
                                                 pattern=DN, max_length=1024)
    group_search_base: Optional[str] = spec_field("Groups only under this DN (ldap_group_search_base).", None,
                                                  pattern=DN, max_length=1024)
    schema: str = spec_field(
        "How groups name their members: rfc2307 (memberUid, OpenLDAP's nis schema) or rfc2307bis (member, a DN).",
        "rfc2307", enum=LDAP_SCHEMAS)
    bind_dn: Optional[str] = spec_field("Who SSSD binds as to search (anonymous when unset).", None, pattern=DN,
                                        max_length=1024)
    bind_password_secret: Optional[str] = spec_field(
        "With bindDn: a Secret of the namespace whose key 'password' is bindDn's password (read by the SSSD "
        "containers only, never by the operator).", None, pattern=DNS1123_SUBDOMAIN, max_length=253)
    ca_secret: Optional[str] = spec_field(
        "A Secret whose key 'ca.crt' is the CA that signed the servers' certificates: TLS is then required and "
        "checked (ldaps://, or StartTLS on ldap://).", None, pattern=DNS1123_SUBDOMAIN, max_length=253)
    min_id: int = spec_field(
        "Directory users and groups with a lower id are ignored (SSSD's min_id): the jail's own accounts and "
        "the system's keep theirs.", 1000, minimum=1, maximum=2147483647)


@dataclass(frozen=True)
class Directory:
    """Users and groups from the site's directory: SSSD beside the login, controller, worker and slurmdbd
    containers (a sidecar each, its sockets shared with them and bound into the jail), so `id`,
    `ls -l`, slurmctld's AllowGroups and the jobs' supplementary groups see the directory's users;
    the jail's own accounts (jail_user) come first."""

    ldap: Optional[Ldap] = spec_field("The LDAP directory. Unset: no directory (the jail's accounts only).", None)
    password_login: bool = spec_field(
        "Users may log in to the login nodes with their directory password (sshd through PAM and SSSD); keys "
        "in ~/.ssh/authorized_keys always work.", False)
    make_homes: bool = spec_field(
        "A directory user's home is made in the jail at their first login, from the jail's /etc/skel "
        "(pam_mkhomedir).", True)
