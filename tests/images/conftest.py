"""The docker tier's shared fixture: the images, built once a session."""

from __future__ import annotations

import pytest
from test_images import built_images


@pytest.fixture(scope="session")
def images() -> dict:
    return built_images()
