"""is_subset: what counts as 'already applied' (a no-op pass writes nothing, a changed field is put back)."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import is_subset
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import without_empty_maps


def env(*names: str) -> list:
    return [{"name": n, "value": n.lower()} for n in names]


def test_named_items_another_manager_added_do_not_make_us_apply_again():
    # Server-side apply keeps another manager's env entry beside ours: applying again changes nothing.
    assert is_subset({"env": env("A", "B")}, {"env": env("A", "X", "B")})


def test_a_named_item_of_ours_changed_or_missing_is_a_difference():
    assert not is_subset({"env": env("A", "B")}, {"env": env("A")})
    assert not is_subset({"env": [{"name": "A", "value": "a"}]}, {"env": [{"name": "A", "value": "other"}]})


def test_plain_lists_must_match_whole():
    assert is_subset({"args": ["-D", "-v"]}, {"args": ["-D", "-v"]})
    assert not is_subset({"args": ["-D"]}, {"args": ["-D", "-v"]})
    assert not is_subset({"args": ["-D", "-v"]}, {"args": ["-v", "-D"]})


def test_quantities_compare_by_value_and_server_fields_are_ignored():
    assert is_subset({"cpu": "1000m", "memory": "2048Mi"}, {"cpu": "1", "memory": "2Gi", "extra": 1})


def test_empty_maps_are_left_out_of_a_status():
    status = {"phase": "Ready", "nodesByState": {}, "replicas": 0}
    assert without_empty_maps(status) == {"phase": "Ready", "replicas": 0}
