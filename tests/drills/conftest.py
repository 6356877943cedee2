import pytest

from tests.support.drills import Cluster


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    c.close()
    print(c.tails())
