"""tests/conftest.py refuses test ids holding a memory address (tests/helpers/stable_ids.py)."""
from tests.helpers.stable_ids import ids_with_an_address, unstable_ids_error


def test_an_objects_default_repr_in_an_id_is_found():
    ids = [f"t.py::test_x[a-{object()!r}]", "t.py::test_x[a-1]", "t.py::test_y",
           f"t.py::test_z[{test_an_objects_default_repr_in_an_id_is_found!r}]"]
    assert ids_with_an_address(ids) == [ids[0], ids[3]]


def test_ids_of_plain_values_pass():
    ids = ["t.py::test_x[ethos-u-accelerator_config-'no-such-value']", "t.py::test_x[0x10]",
           "t.py::test_x[<_Stranger>]"]
    assert ids_with_an_address(ids) == []


def test_the_error_names_a_test_and_the_fix():
    msg = unstable_ids_error(["t.py::test_x[<object object at 0x7f00>]"])
    assert "t.py::test_x[<object object at 0x7f00>]" in msg and "explicit id" in msg
    assert "\n" not in msg
