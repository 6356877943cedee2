import pytest

from tests.drills.harness import Cluster


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    c.close()
    print(c.tails())
