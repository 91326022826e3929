"""Sphinx's settings for the admin's manual (tools/manual.sh builds it): the guides in Markdown
(MyST) and the collection's reference, which antsibull-docs writes into reference/."""

from __future__ import annotations

import re
from typing import Any, Optional

from docutils import nodes

project = "slurmkube.core"
author = "the slurmkube authors"
extensions = ["myst_parser", "sphinx_antsibull_ext"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["build"]
html_theme = "sphinx_ansible_theme"
html_title = "slurmkube.core: the admin's manual"
html_show_sphinx = False
html_copy_source = False
pygments_style = "ansible"
highlight_language = "YAML+Jinja"
# Headings get anchors, so a guide can link to another's section.
myst_heading_anchors = 3
nitpicky = True

# The pages of Ansible's own documentation the reference links to: its sections of other
# collections' plugins (kubernetes.core's connection options name community.okd's k8s_auth) and
# of return values. The Ansible docs site resolves them through intersphinx; this manual is built
# offline, so they become plain links to that site. A label of this collection stays unresolved,
# and the build fails on it.
ANSIBLE_DOCS = "https://docs.ansible.com/ansible/latest/"
ANSIBLE_PAGES = {
    "common_return_values": "reference_appendices/common_return_values.html",
    "ansible_configuration_settings": "reference_appendices/config.html",
    "action_plugins": "plugins/action.html",
}
OTHER_PLUGIN = re.compile(r"ansible_collections\.(\w+)\.(\w+)\.(\w+)_(module|lookup|filter|inventory|connection)")


def ansible_docs_url(label: str) -> Optional[str]:
    """The docs.ansible.com page of LABEL, or None when it is not another collection's or Ansible's."""
    if label in ANSIBLE_PAGES:
        return ANSIBLE_DOCS + ANSIBLE_PAGES[label]
    found = OTHER_PLUGIN.fullmatch(label)
    if found is None or found.group(1, 2) == ("slurmkube", "core"):
        return None
    namespace, name, plugin, kind = found.groups()
    return ANSIBLE_DOCS + "collections/%s/%s/%s_%s.html" % (namespace, name, plugin, kind)


def link_to_ansible_docs(_app: Any, _env: Any, node: Any, contnode: Any) -> Optional[nodes.reference]:
    """Sphinx's missing-reference event: a label on docs.ansible.com becomes a link there."""
    url = ansible_docs_url(node.get("reftarget", ""))
    if url is None:
        return None
    reference = nodes.reference("", "", internal=False, refuri=url)
    reference.append(contnode)
    return reference


def setup(app: Any) -> None:
    app.connect("missing-reference", link_to_ansible_docs)
