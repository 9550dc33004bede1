"""Writing a table block by block (``privsyn_core.data.streamed``): the file holds what the
in-memory writer would, appears only when complete, and a failure part-way leaves no file
and the old one as it was."""

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core.data.streamed as streamed
from privsyn_core.data.streamed import TableFile, csv_text, write_blocks
from privsyn_core.errors import InputError


def frames(count: int = 3, rows: int = 500) -> list[pd.DataFrame]:
    rng = np.random.default_rng(0)
    out = []
    for index in range(count):
        out.append(
            pd.DataFrame(
                {
                    "n": rng.integers(0, 100, rows),
                    "x": rng.normal(size=rows).round(3),
                    "word": pd.Series(rng.choice(["a", "b,c", 'q"uote'], rows), dtype=object),
                    "maybe": pd.array(
                        np.where(rng.random(rows) < 0.1, None, rng.integers(0, 3, rows)),
                        dtype="Int64",
                    ),
                    "colour": pd.Categorical(rng.choice(["red", "blue"], rows), ["red", "blue"]),
                },
                index=pd.RangeIndex(rows) + index * 7,  # indexes are never written
            )
        )
    return out


def whole(blocks: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(blocks, ignore_index=True)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


def test_a_streamed_csv_is_the_in_memory_csv(tmp_path):
    blocks = frames()
    target = tmp_path / "out.csv"
    assert write_blocks(iter(blocks), target) == 1500
    assert target.read_text() == whole(blocks).to_csv(index=False)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint64"])
@pytest.mark.parametrize("header", [True, False])
def test_whole_numbers_are_written_as_pandas_writes_them(dtype, header):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(1)
    values = rng.integers(info.min, info.max, (300, 3), dtype=dtype, endpoint=True)
    values[:2] = [[info.min] * 3, [info.max] * 3]
    frame = pd.DataFrame(values, columns=["a", "b,c", 'q"uote'], index=np.arange(300) * 3)
    assert csv_text(frame, header) == frame.to_csv(index=False, header=header)


def test_a_whole_number_table_over_many_slices_is_the_in_memory_csv(tmp_path, monkeypatch):
    monkeypatch.setattr(streamed, "_CSV_CELLS", 7)  # 3 rows a slice; the middle block is empty
    rng = np.random.default_rng(2)
    blocks = [pd.DataFrame(rng.integers(-5, 500, (n, 2)), columns=["x", "y"]) for n in (10, 0, 6)]
    target = tmp_path / "out.csv"
    assert write_blocks(iter(blocks), target) == 16
    assert target.read_text() == whole(blocks).to_csv(index=False)


def test_any_other_table_is_written_by_pandas():
    for frame in frames(1, 50):
        assert csv_text(frame) == frame.to_csv(index=False)
    empty = pd.DataFrame({"a": np.array([], dtype=np.int64)})
    assert csv_text(empty) == "a\n"


def test_a_streamed_parquet_reads_back_as_the_in_memory_table(tmp_path):
    blocks = frames()
    target = tmp_path / "out.parquet"
    assert write_blocks(iter(blocks), target) == 1500
    expected = tmp_path / "memory.parquet"
    whole(blocks).to_parquet(expected, index=False)
    pd.testing.assert_frame_equal(pd.read_parquet(target), pd.read_parquet(expected))
    import pyarrow.parquet as pq

    assert pq.ParquetFile(target).metadata.num_row_groups == 3  # a row group per block


def test_a_column_missing_in_the_whole_first_block_is_text_in_parquet(tmp_path):
    first = pd.DataFrame({"a": [1, 2], "w": pd.Series([None, None], dtype=object)})
    second = pd.DataFrame({"a": [3], "w": pd.Series(["x"], dtype=object)})
    target = tmp_path / "out.parquet"
    write_blocks(iter([first, second]), target)
    column = pd.read_parquet(target)["w"]
    assert column.isna().tolist() == [True, True, False] and column.iloc[2] == "x"


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_failure_part_way_leaves_no_file_and_the_old_one_as_it_was(tmp_path, suffix):
    target = tmp_path / f"out{suffix}"
    target.write_bytes(b"the previous release")

    def failing():
        yield from frames(2)
        raise RuntimeError("block 3 failed")

    with pytest.raises(RuntimeError, match="block 3"):
        write_blocks(failing(), target)
    assert target.read_bytes() == b"the previous release"
    assert leftovers(tmp_path) == []
    fresh = tmp_path / f"new{suffix}"
    with pytest.raises(RuntimeError):
        write_blocks(failing(), fresh)
    assert not fresh.exists() and leftovers(tmp_path) == []


def test_the_file_appears_only_on_commit(tmp_path):
    target = tmp_path / "out.csv"
    with TableFile(target) as out:
        out.write(iter(frames(1)))
        assert not target.exists() and len(leftovers(tmp_path)) == 1
    assert not target.exists() and leftovers(tmp_path) == []  # never committed
    with TableFile(target) as out:
        out.write(iter(frames(1)))
        out.commit()
    assert len(pd.read_csv(target)) == 500
    assert oct(os.stat(target).st_mode & 0o777) != oct(0o600)  # normal permissions


def test_each_csv_block_is_prepared_before_it_is_written(tmp_path):
    seen = []

    def prepare(frame: pd.DataFrame) -> pd.DataFrame:
        seen.append(len(frame))
        return frame.assign(word="w")

    target = tmp_path / "out.csv"
    write_blocks(iter(frames(2)), target, prepare=prepare)
    assert seen == [500, 500] and set(pd.read_csv(target)["word"]) == {"w"}


def test_a_table_the_disk_cannot_hold_is_refused_after_its_first_block(tmp_path, monkeypatch):
    real = shutil.disk_usage
    monkeypatch.setattr(streamed.shutil, "disk_usage", lambda path: real(path)._replace(free=10**6))
    produced = []

    def blocks():
        for frame in frames(3):
            produced.append(len(frame))
            yield frame

    target = tmp_path / "out.csv"
    with pytest.raises(InputError, match=r"100,000,000 rows need about .* of disk.*fewer rows"):
        write_blocks(blocks(), target, rows=10**8)
    assert len(produced) == 2 and not target.exists() and leftovers(tmp_path) == []
