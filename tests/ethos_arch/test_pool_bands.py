"""``ethos_arch.pool_bands``: a window past one pool's 256 rows and 65536 elements is cut
into bands of whole rows, each one pool's, as few as those limits allow."""
from hypothesis import given
from hypothesis import strategies as st

from ethos_arch.pool_bands import MAX_POOL_AREA, MAX_POOL_ROWS, one_pool, pool_bands


@given(rows=st.integers(1, 70000), columns=st.integers(1, 65536))
def test_the_bands_cover_every_row_once_each_within_one_pool_and_as_few_as_can(rows, columns):
    b = pool_bands(rows, columns)
    sizes = [min(b.rows, rows - i * b.rows) for i in range(b.count)]
    assert sum(sizes) == rows and min(sizes) >= 1
    assert all(one_pool(n, columns) for n in sizes)
    # one row more per band would break a limit (or there is one band of every row)
    assert b.count == 1 or not one_pool(b.rows + 1, columns)
    assert (b.count == 1) == one_pool(rows, columns)


def test_one_pool_takes_its_limits_and_nothing_past_them():
    assert one_pool(MAX_POOL_ROWS, MAX_POOL_AREA // MAX_POOL_ROWS) and one_pool(1, MAX_POOL_AREA)
    assert not one_pool(MAX_POOL_ROWS + 1, 1) and not one_pool(2, MAX_POOL_AREA // 2 + 1)
